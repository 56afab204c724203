"""The server's log as window/logMessage (server/logs.py): each record at its level, from any
thread, kept until the editor's initialize and after it leaves; errors and pygls' own chatter are
not sent (stderr has the errors)."""

from __future__ import annotations

import asyncio
import logging
import threading

from lsprotocol import types

from kernel_lsp.server.logs import ClientLogHandler, message_type


class FakeServer:
    def __init__(self) -> None:
        self.sent: list[tuple[types.MessageType, str]] = []

    def window_log_message(self, params: types.LogMessageParams) -> None:
        self.sent.append((params.type, params.message))


def test_levels_map_to_message_types():
    assert message_type(logging.DEBUG) == types.MessageType.Log
    assert message_type(logging.INFO) == types.MessageType.Info
    assert message_type(logging.WARNING) == types.MessageType.Warning
    assert message_type(logging.ERROR) == types.MessageType.Error


def test_records_are_kept_until_initialize_then_sent_in_order_from_any_thread():
    server = FakeServer()
    handler = ClientLogHandler(server)
    log = logging.getLogger("kernel_lsp.test_server_log")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    log.addHandler(handler)
    try:
        log.info("before initialize")
        log.error("an error")  # stderr's, not the editor's log
        assert server.sent == []

        async def session() -> None:
            handler.connected()
            log.warning("on the loop")
            worker = threading.Thread(target=log.debug, args=("from a thread",))
            worker.start()
            worker.join()
            await asyncio.sleep(0.05)  # the thread's record is sent from the loop

        asyncio.run(session())
        assert server.sent == [
            (types.MessageType.Info, "before initialize"),
            (types.MessageType.Warning, "on the loop"),
            (types.MessageType.Log, "from a thread"),
        ]
        handler.disconnected()
        log.info("after the editor left")
        assert len(server.sent) == 3  # kept for the next editor, not written to a closed stream
    finally:
        log.removeHandler(handler)


def test_pygls_chatter_is_never_sent_its_warnings_are():
    handler = ClientLogHandler(FakeServer())

    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "text", (), None)

    assert not handler.filter(record("pygls.protocol.json_rpc", logging.INFO))  # "Sending data"
    assert handler.filter(record("pygls.protocol.json_rpc", logging.WARNING))
    assert handler.filter(record("kernel_lsp.server.app", logging.INFO))
    assert not handler.filter(record("kernel_lsp.server.app", logging.ERROR))  # stderr's
