"""The command-line front ends (check, watch, bench, spec, optimize, serve), each a thin caller of
the engine. `main` is the `kernel-lsp` entry point."""

from .main import main

__all__ = ["main"]
