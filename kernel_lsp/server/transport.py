"""LSP over stdio, read strictly: headers, an empty line, then exactly Content-Length bytes.

pygls' own reader skips header lines it does not understand and waits for a valid one: after
`Content-Length: abc`, a negative length or a body sent without one, it read the rest of the
stream as headers and never answered again, and the client could not tell. Here a framing error
ends the server with a log line and exit code 1, so that the client sees it stop and restarts it
(what rust-analyzer's lsp-server does). A message that parses but does not fit its method (hover
with a string for params) gets a JSON-RPC error reply instead of silence; a notification that
does not fit is logged and dropped, as the protocol has no reply for it.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from lsprotocol.types import ResponseError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.io_ import StdoutWriter

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8192
# A message larger than this is a broken stream, not a request (a 2 MiB file in didOpen is ~3 MB
# of JSON).
MAX_MESSAGE_BYTES = 512 * 2**20
EXIT_FRAMING_ERROR = 1


class FramingError(Exception):
    """The byte stream is not LSP's base protocol any more: nothing after it can be trusted."""


class _StdinReader:
    """Blocking reads of stdin in a thread of their own (never a pool the rest of the server
    waits on: at exit, a read that never returns must not hold the process)."""

    def __init__(self, stdin: BinaryIO, prefix: bytes = b"") -> None:
        self._stdin = stdin
        self._prefix = io.BytesIO(prefix)  # what was read before the server started (early_initialize)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-lsp-stdin")

    def _readline(self, n: int) -> bytes:
        data = self._prefix.readline(n)
        if len(data) < n and not data.endswith(b"\n"):
            data += self._stdin.readline(n - len(data))
        return data

    def _read(self, n: int) -> bytes:
        data = self._prefix.read(n)
        return data + self._stdin.read(n - len(data)) if len(data) < n else data

    async def readline(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._readline, MAX_HEADER_LINE)

    async def read(self, n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._read, n)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


async def read_message(reader) -> bytes | None:
    """One message body, or None at the end of the stream between messages. Raises FramingError
    for anything else: a header line without a colon or too long, a Content-Length that is not a
    non-negative number or too large, a message without one, a stream that ends inside one."""
    length: int | None = None
    started = False
    while True:
        line = await reader.readline()
        if not line:
            if not started:
                return None
            raise FramingError("the stream ended inside a message's headers")
        started = True
        if line in (b"\r\n", b"\n"):
            break
        if not line.endswith(b"\n"):
            raise FramingError(f"a header line longer than {MAX_HEADER_LINE} bytes: {line[:60]!r}...")
        name, colon, value = line.partition(b":")
        if not colon:
            raise FramingError(f"a header line without a colon: {line[:80]!r}")
        if name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit():
                raise FramingError(f"Content-Length is not a non-negative number: {text[:40]!r}")
            length = int(text)
            if length > MAX_MESSAGE_BYTES:
                raise FramingError(f"Content-Length {length} is over the {MAX_MESSAGE_BYTES} bytes allowed")
    if length is None:
        raise FramingError("a message without a Content-Length header")
    body = await reader.read(length)
    if len(body) < length:
        raise FramingError(f"the stream ended inside a message body ({len(body)} of {length} bytes)")
    return body


def dispatch(protocol, body: bytes) -> None:
    """Hand one message body to pygls' protocol; a body it cannot take gets the JSON-RPC error
    the specification names (ParseError, InvalidRequest, InvalidParams) when it was a request."""
    try:
        data = json.loads(body)
    except ValueError as e:  # not JSON, or not UTF-8
        log.error("a message that is not JSON (%s): %r", e, body[:200])
        _reply_error(protocol, None, JsonRpcParseError(f"Parse error: {e}"))
        return
    if not isinstance(data, dict):
        log.error("a message that is not a JSON object: %r", body[:200])
        _reply_error(
            protocol, None, JsonRpcInvalidRequest("Invalid Request: a message must be a JSON object")
        )
        return
    try:
        message = protocol.structure_message(data)
    except JsonRpcException as e:
        method = data.get("method")
        cause = str(e.__cause__ or e).splitlines()[0] if (e.__cause__ or e) else ""
        log.error("%s with params that do not fit it: %s", method or "a response", cause)
        if "id" in data and method is not None:
            e.message = f"{e.message}: the params do not fit {method} ({cause})"
            _reply_error(protocol, data["id"], e)
        return
    protocol.handle_message(message)


def _reply_error(protocol, msg_id, error: JsonRpcException) -> None:
    # pygls has no public call for an error reply outside a handler; this is the one it uses.
    protocol._send_response(
        msg_id, error=ResponseError(code=error.code, message=error.message, data=error.data)
    )


async def _serve(protocol, reader, ended=lambda: None) -> int:
    """`ended`: called when the stream ends or breaks, before that is logged (the log must not
    be sent to a client that is gone)."""
    while True:
        try:
            body = await read_message(reader)
        except FramingError as e:
            ended()
            log.error("LSP framing error, stopping so that the client restarts the server: %s", e)
            return EXIT_FRAMING_ERROR
        if body is None:
            ended()
            log.info("the client closed stdin; stopping")
            return 0
        try:
            dispatch(protocol, body)
        except SystemExit as e:  # the `exit` notification
            return e.code if isinstance(e.code, int) else 0
        except Exception:
            log.exception("a message could not be handled")


class _EarlyWriter(StdoutWriter):
    """stdout, less the server's own `initialize` answer where one went out early."""

    def __init__(self, stdout: BinaryIO, early) -> None:
        super().__init__(stdout)
        self._early = early

    def write(self, data: bytes) -> None:
        if self._early is not None:
            keep = self._early.server_reply(data)
            if self._early.request_id is None:
                self._early = None
            if not keep:
                return
        super().write(data)


def serve_stdio(server, stdin: BinaryIO, stdout: BinaryIO, early=None) -> int:
    """Serve until the `exit` notification, the end of stdin or a framing error; the exit code.
    `early`: what kernel_lsp.early_initialize read (and maybe answered) before the server loaded."""
    server.protocol.set_writer(_EarlyWriter(stdout, early) if early is not None else StdoutWriter(stdout))
    reader = _StdinReader(stdin, early.prefix if early is not None else b"")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(_serve(server.protocol, reader, functools.partial(_log_stays, server)))
    except BrokenPipeError:
        log.error("the client closed stdout; stopping")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        reader.close()
        _close_loop(loop)


def _log_stays(server) -> None:
    """The client is gone: the log stops going to it (logs.py)."""
    if getattr(server, "client_log", None) is not None:
        server.client_log.disconnected()


def _close_loop(loop: asyncio.AbstractEventLoop, grace_s: float = 2.0) -> None:
    """Cancel what is left and close the loop without waiting for its threads (asyncio.run
    waits for every thread of the default executor: one stuck in a read held the exit)."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        try:
            loop.run_until_complete(asyncio.wait(tasks, timeout=grace_s))
        except Exception:
            log.debug("tasks at exit", exc_info=True)
    loop.close()
