"""The language server: the only package that knows LSP. One module per LSP method under
`requests/` and `notifications/`; `app.py` holds the server's state, `analysis.py` runs checks
off the event loop, `convert.py` turns engine data into lsprotocol types."""

from __future__ import annotations


def build_server():
    from .app import KernelLanguageServer
    from .clangd.features import register as register_clangd
    from .notifications import register_all as register_notifications
    from .requests import register_all as register_requests

    server = KernelLanguageServer()
    register_notifications(server)
    register_requests(server)
    register_clangd(server)
    return server


def serve(tcp: tuple[str, int] | None = None) -> None:
    server = build_server()
    if tcp:
        server.start_tcp(*tcp)
    else:
        server.start_io()
