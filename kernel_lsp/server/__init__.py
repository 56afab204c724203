"""The language server: the only package that knows LSP. One module per LSP method under
`requests/` and `notifications/`; `app.py` holds the server's state, `analysis.py` runs checks
off the event loop, `convert.py` turns engine data into lsprotocol types."""

from __future__ import annotations


def build_server():
    from .app import KernelLanguageServer
    from .notifications import register_all as register_notifications
    from .requests import register_all as register_requests

    server = KernelLanguageServer()
    register_notifications(server)
    register_requests(server)
    return server


def serve(tcp: tuple[str, int] | None = None, log_file: str | None = None) -> int:
    """Serve until exit; the exit code (1 after a framing error or an exit without shutdown)."""
    server = build_server()
    server.log_file = log_file
    if tcp:
        try:
            server.start_tcp(*tcp)
        finally:
            server.close()
    else:
        server.start_io()
    return server.exit_code
