"""The command line's exit codes (ruff's): 0 clean, 1 findings, 2 the tool failed. A module of
their own so that the server's start (`kernel-lsp` with no command) need not import the engine
that `flags.py` builds its Workspace from."""

EXIT_CLEAN, EXIT_FINDINGS, EXIT_TOOL_FAILED = 0, 1, 2
