"""JSON-RPC 2.0 over a pair of asyncio streams, LSP-framed (`Content-Length` headers).

Messages stay plain JSON (dicts): the proxy passes clangd's results on as they are, so nothing is
converted to lsprotocol types and back on the way (a completion list of 500 items costs one
`json.loads` and one `json.dumps`). pygls' `JsonRPCClient` structures every message through cattrs
and hands untyped results back as namedtuples, which a pass-through would have to undo.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# A header block or a body larger than this is a broken peer, not a message.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
METHOD_NOT_FOUND = -32601


class RpcError(Exception):
    """An error response from the peer, or the connection closing under a request."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class JsonRpcConnection:
    """Requests (each a future), notifications, and `$/cancelRequest`. Requests the peer sends
    go to `on_request` (its return value is the result; None when there is no handler);
    notifications to `on_notification`. Never blocks: writes go to the stream's buffer."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_notification: Callable[[str, Any], None] = lambda method, params: None,
        on_request: Callable[[str, Any], Any] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_notification = on_notification
        self._on_request = on_request
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self.closed = False

    # --- sending ------------------------------------------------------------------------------

    def _send(self, message: dict) -> None:
        if self.closed:
            raise RpcError("the connection is closed")
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self._writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None) -> tuple[int, asyncio.Future]:
        """Send a request: (its id, a future for its result)."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        except Exception:
            self._pending.pop(request_id, None)
            raise
        return request_id, future

    async def call(self, method: str, params: Any = None) -> Any:
        """A request whose result is awaited; cancelling the awaiting task cancels it at the peer."""
        request_id, future = self.request(method, params)
        try:
            return await future
        except asyncio.CancelledError:
            self.cancel(request_id)
            raise

    def cancel(self, request_id: int) -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()
        if not self.closed:
            with contextlib.suppress(RpcError):
                self.notify("$/cancelRequest", {"id": request_id})

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # --- receiving ----------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read messages until the peer closes its end; then fail the requests still waiting."""
        try:
            while True:
                message = await self._read_message()
                if message is None:
                    break
                self._dispatch(message)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("connection ended: %s", e)
        finally:
            self._close_pending("the language server's connection closed")

    async def _read_message(self) -> dict | None:
        length = None
        while True:
            line = await self._reader.readline()
            if not line:
                return None  # end of stream
            if len(line) > 4096:
                raise ConnectionError("a header line longer than 4096 bytes")
            line = line.strip()
            if not line:
                if length is None:
                    continue  # stray blank line between messages
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
                if not 0 <= length <= MAX_MESSAGE_BYTES:
                    raise ConnectionError(f"a message of {length} bytes")
        body = await self._reader.readexactly(length)
        try:
            message = json.loads(body)
        except ValueError:
            log.warning("dropped a message that is not JSON (%d bytes)", length)
            return {}
        return message if isinstance(message, dict) else {}

    def _dispatch(self, message: dict) -> None:
        method = message.get("method")
        if method is None:
            answered = message.get("id")  # ours are ints
            future = self._pending.pop(answered, None) if isinstance(answered, int) else None
            if future is None or future.done():
                return  # an answer to a request cancelled meanwhile
            if "error" in message:
                error = message["error"] or {}
                future.set_exception(RpcError(str(error.get("message", "error")), error.get("code")))
            else:
                future.set_result(message.get("result"))
            return
        if "id" in message:
            self._answer(message["id"], method, message.get("params"))
            return
        try:
            self._on_notification(method, message.get("params"))
        except Exception:
            log.exception("handling %s from the language server failed", method)

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            if self._on_request is None:
                raise LookupError(method)
            reply["result"] = self._on_request(method, params)
        except LookupError:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"{method} is not handled"}
        except Exception as e:
            log.exception("answering %s failed", method)
            reply["error"] = {"code": -32603, "message": str(e)}
        with contextlib.suppress(RpcError):
            self._send(reply)

    def _close_pending(self, why: str) -> None:
        self.closed = True
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(RpcError(why))

    def close(self) -> None:
        self._close_pending("the connection was closed")
        with contextlib.suppress(Exception):
            self._writer.close()
