"""The server's log, where editors show it: `window/logMessage`, with each record's level as its
MessageType (Info, Warning, Error; Log for debug records).

Editors show whatever a server writes on stderr as errors (VS Code's output channel takes it
verbatim, Neovim's lsp.log files it under [ERROR] "stderr"), so INFO lines there read as failures.
The log therefore goes to the editor through the protocol; stderr keeps the real errors (ERROR and
above), which must get out even when the protocol cannot: a framing error, a closed stdout.

Records come from any thread (compile results, the watcher, clangd's stderr): they are sent from
the event loop's thread, in order. Records logged before the editor's `initialize` arrives are kept
(a bounded number) and sent when it does: the protocol allows logMessage from then on. pygls' own
chatter (below WARNING: each message it sends, at `--log-level DEBUG`) stays on stderr: sent as
messages, it would log itself forever.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading

from lsprotocol import types

KEPT_BEFORE_INITIALIZE = 200


def message_type(level: int) -> types.MessageType:
    if level >= logging.ERROR:
        return types.MessageType.Error
    if level >= logging.WARNING:
        return types.MessageType.Warning
    if level >= logging.INFO:
        return types.MessageType.Info
    return types.MessageType.Log


def is_pygls(record: logging.LogRecord) -> bool:
    return record.name == "pygls" or record.name.startswith("pygls.")


class ClientLogHandler(logging.Handler):
    """Sends log records below ERROR to the editor as `window/logMessage` (errors go to stderr)."""

    def __init__(self, server, below: int = logging.ERROR) -> None:
        super().__init__()
        self.server = server
        self.below = below
        self.setFormatter(logging.Formatter("%(message)s"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kept: collections.deque[tuple[types.MessageType, str]] = collections.deque(
            maxlen=KEPT_BEFORE_INITIALIZE
        )
        self._lock = threading.Lock()
        self._sending = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.below or (is_pygls(record) and record.levelno < logging.WARNING):
            return False
        return super().filter(record)

    def connected(self) -> None:
        """The editor's `initialize` has arrived (on the loop's thread): send what was kept, and
        everything from now on."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._loop = loop
            kept, self._kept = list(self._kept), collections.deque(maxlen=KEPT_BEFORE_INITIALIZE)
        for kind, text in kept:
            self._send(kind, text)

    def disconnected(self) -> None:
        """The editor is going (shutdown, the end of its stream): records are kept again (a next
        editor over --tcp gets them), never written to a stream nobody reads."""
        with self._lock:
            self._loop = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind, text = message_type(record.levelno), self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._lock:
            loop = self._loop
            if loop is None:
                self._kept.append((kind, text))
                return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._send(kind, text)
        elif not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the server is ending
                loop.call_soon_threadsafe(self._send, kind, text)

    def _send(self, kind: types.MessageType, text: str) -> None:
        if getattr(self._sending, "now", False):
            return  # a record logged while sending one (the transport's own complaint)
        self._sending.now = True
        try:
            self.server.window_log_message(types.LogMessageParams(type=kind, message=text))
        except Exception:
            pass  # no editor attached any more; errors still reach stderr
        finally:
            self._sending.now = False


def send_log_to_client(server) -> ClientLogHandler:
    """Route the log's records below ERROR to `server`'s editor (added to the root logger)."""
    handler = ClientLogHandler(server)
    logging.getLogger().addHandler(handler)
    return handler
