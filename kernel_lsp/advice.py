"""Advice that names a setting. The engine words it for the command line (flags and
`[tool.kernel-lsp]`); the language server swaps in the editor's setting at its edge
(`server/convert.py`), so each front end names what its user can change."""

from __future__ import annotations

DEFAULT_DEVICE = "pass --default-device (or `default-device = true` under [tool.kernel-lsp])"
INCLUDE_DIRS = "add its folder with -I/--include DIR (or `include = [...]` under [tool.kernel-lsp])"

_IN_EDITOR = {
    DEFAULT_DEVICE: "turn on the kernelLsp.defaultDevice setting",
    INCLUDE_DIRS: "add its folder to the kernelLsp.includeDirs setting",
}


def for_editor(message: str) -> str:
    for cli, editor in _IN_EDITOR.items():
        message = message.replace(cli, editor)
    return message
