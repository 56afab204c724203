"""LSP notifications the server handles, one module each."""

from __future__ import annotations


def register_all(server) -> None:
    from . import did_change, did_change_configuration, did_close, did_open, did_save, initialized

    for module in (initialized, did_open, did_change, did_save, did_close, did_change_configuration):
        module.register(server)
    from .. import watching

    watching.register(server)
