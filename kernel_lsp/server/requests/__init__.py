"""LSP requests the server answers, one module each."""

from __future__ import annotations


def register_all(server) -> None:
    from . import code_lens, diagnostic, hover

    for module in (hover, diagnostic, code_lens):
        module.register(server)
