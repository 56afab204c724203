"""The language server: the only package that knows LSP. One module per LSP method under
`requests/` and `notifications/`; `app.py` holds the server's state, `analysis.py` runs checks
off the event loop, `convert.py` turns engine data into lsprotocol types."""

from __future__ import annotations

from .tcp import TcpSetupError, check_loopback, load_token

__all__ = ["TcpSetupError", "build_server", "check_loopback", "load_token", "serve"]


def build_server(log_file: str | None = None):
    from .app import KernelLanguageServer
    from .clangd.features import register as register_clangd
    from .notifications import register_all as register_notifications
    from .requests import register_all as register_requests

    server = KernelLanguageServer(log_file)
    register_notifications(server)
    register_requests(server)
    register_clangd(server)
    return server


def serve(
    tcp: tuple[str, int] | None = None,
    token: str | None = None,
    on_listening=None,
    log_file: str | None = None,
    early=None,
) -> int:
    """Over stdio, or over TCP (`tcp`: host, port) for editors that send `token` (tcp.py), until
    exit; the exit code (1 after a framing error on stdio or an exit without shutdown)."""
    server = build_server(log_file)
    server.log_to_client()  # the log goes to the editor as window/logMessage
    if tcp:
        from .tcp import serve_tcp

        assert token, "--tcp needs a token"
        try:
            serve_tcp(server, *tcp, token=token, on_listening=on_listening)
        finally:
            server.close()
    else:
        server.start_io(early=early)  # early: kernel_lsp.early_initialize
    return server.exit_code
