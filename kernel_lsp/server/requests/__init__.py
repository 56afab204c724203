"""LSP requests the server answers, one module each."""

from __future__ import annotations


def register_all(server) -> None:
    from . import code_action, code_lens, diagnostic, execute_command, hover, spec_skeleton, stats

    for module in (hover, diagnostic, code_lens, stats, code_action, execute_command, spec_skeleton):
        module.register(server)
