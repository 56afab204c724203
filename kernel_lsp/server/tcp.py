"""`kernel-lsp --tcp HOST:PORT`: LSP over TCP, for the editor of the user who started it only.

LSP has no authentication, and whoever talks to the server can make it run a spec (send one as
an open document's text). So:
- the socket is bound to a loopback address only (another machine cannot connect at all);
- a connection's first message must be `initialize` with `initializationOptions.token` equal to
  the server's token (printed when it starts, or kept in `--token-file`, a file only the user can
  read: editors such as Neovim and Emacs send init options as configured). Anything else gets an
  error reply and is closed, with a line in the log; nothing it sent reaches the server;
- one editor at a time: pygls keeps one protocol state, so a second authenticated connection
  while one is served is told so and closed;
- a connection that ends without `shutdown` leaves the server listening for the next one (pygls'
  own TCP server stopped when the first connection closed, anyone's); `shutdown` + `exit` from
  the editor end it, as over stdio.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import stat
import threading
from typing import Any

from pygls.io_ import run_async

log = logging.getLogger(__name__)

TOKEN_OPTION = "token"
MIN_TOKEN_CHARS = 16
FIRST_MESSAGE_TIMEOUT_S = 10.0
MAX_FIRST_MESSAGE_BYTES = 4 << 20  # an initialize with a large settings object still fits


class TcpSetupError(Exception):
    """The server cannot listen as asked (a non-loopback host, an unsafe token file)."""


def check_loopback(host: str) -> None:
    """Raise TcpSetupError unless every address `host` names is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as e:
        raise TcpSetupError(f"--tcp: cannot resolve {host!r}: {e}") from None
    addresses = {str(info[4][0]) for info in infos}  # a str for IP addresses (typeshed: str | int)
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if outside:
        raise TcpSetupError(
            f"--tcp: {host} is reachable from other machines ({', '.join(outside)}); kernel-lsp listens "
            "on a loopback address only (127.0.0.1, ::1, localhost): whoever connects can make it run "
            "code as you"
        )


def load_token(token_file: str | None) -> tuple[str, bool]:
    """(token, made): the token in `token_file` (which only the user may read), or a new one,
    written there (mode 0600) when the file does not exist yet; without a file, a new one."""
    if not token_file:
        return secrets.token_urlsafe(32), True
    path = os.path.expanduser(token_file)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _read_token_file(path), False
    except OSError as e:
        raise TcpSetupError(f"--token-file {path}: cannot create it: {e.strerror or e}") from None
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    return token, True


def _read_token_file(path: str) -> str:
    """The token in `path`: a regular file, not a link, the user's own, that only the user may
    read (checked on the open file, before a byte is read; a FIFO is refused, not waited on)."""
    from ..api.sources import FileProblem, read_regular  # the engine's reader, loaded only here

    def private(st: os.stat_result) -> None:
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise TcpSetupError(f"--token-file {path} belongs to another user")
        if st.st_mode & 0o077:
            raise TcpSetupError(
                f"--token-file {path} can be read by other users (mode {stat.S_IMODE(st.st_mode):o}); "
                f"chmod 600 {path}"
            )

    try:
        data = read_regular(path, 4096, prefix=True, follow_links=False, inspect=private)
    except FileProblem as e:
        raise TcpSetupError(f"--token-file {e}") from None
    except OSError as e:
        raise TcpSetupError(f"--token-file {path}: cannot read it: {e.strerror or e}") from None
    token = data.decode("utf-8", "replace").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise TcpSetupError(f"--token-file {path} holds no token of {MIN_TOKEN_CHARS}+ characters")
    return token


def serve_tcp(server, host: str, port: int, token: str, on_listening=None) -> None:
    """Serve `server` (a pygls LanguageServer) on host:port until the editor ends it."""
    asyncio.run(_serve(server, host, port, token, on_listening))


async def _serve(server, host: str, port: int, token: str, on_listening) -> None:
    server._stop_event = threading.Event()
    done = asyncio.get_running_loop().create_future()
    active: list[asyncio.StreamWriter] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            first = await asyncio.wait_for(_read_message(reader), FIRST_MESSAGE_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, OSError) as e:
            log.warning("--tcp: closed a connection from %s: no LSP message (%s)", peer, type(e).__name__)
            await _close(writer)
            return
        refusal = _refusal(first, token, busy=bool(active))
        if refusal:
            log.warning("--tcp: refused a connection from %s: %s", peer, refusal)
            await _reply_error(writer, first, f"kernel-lsp --tcp: {refusal}")
            await _close(writer)
            return
        first["params"]["initializationOptions"].pop(TOKEN_OPTION, None)
        log.info("--tcp: editor connected from %s", peer)
        active.append(writer)
        protocol = server.protocol
        protocol.set_writer(writer)
        try:
            message = json.loads(json.dumps(first), object_hook=protocol.structure_message)
            protocol.handle_message(message)
            await run_async(
                stop_event=server._stop_event,
                reader=reader,
                protocol=protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        finally:
            active.remove(writer)
            if getattr(server, "client_log", None) is not None:
                server.client_log.disconnected()  # the log waits for the next editor
            await _close(writer)
        if getattr(protocol, "_shutdown", False):  # the editor asked: shutdown (and exit)
            if not done.done():
                done.set_result(None)
        else:
            log.info("--tcp: the editor's connection ended without shutdown; waiting for the next one")

    tcp = await asyncio.start_server(connection, host, port)
    server._server = tcp
    if on_listening is not None:
        on_listening([s.getsockname() for s in tcp.sockets])
    async with tcp:
        await done
    server.shutdown()


def _refusal(message: Any, token: str, busy: bool) -> str | None:
    """Why a connection's first message does not open a session, or None."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return "the first message must be `initialize` with initializationOptions.token"
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.get(TOKEN_OPTION) if isinstance(options, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        return "initializationOptions.token is missing or wrong"
    if busy:
        return "another editor is connected; kernel-lsp serves one at a time"
    return None


async def _read_message(reader: asyncio.StreamReader) -> Any:
    """One JSON-RPC message: `Content-Length` headers, a blank line, the body (bounded)."""
    length = None
    while True:
        line = await reader.readline()
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None or not 0 < length <= MAX_FIRST_MESSAGE_BYTES:
        raise ValueError("no usable Content-Length")
    return json.loads(await reader.readexactly(length))


async def _reply_error(writer: asyncio.StreamWriter, message: Any, text: str) -> None:
    """An error response to the first request, so the editor can show why (when it had an id)."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if request_id is None:
        return
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": text}}
    ).encode()
    try:
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
    except OSError:
        pass


async def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await writer.wait_closed()
    except OSError:
        pass
