"""The proxy's JSON-RPC connection, its ordered session (cancellation reaches the peer), and the
semantic-token legend mapping, against an in-process peer."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kernel_lsp.server.clangd.proxy import Session
from kernel_lsp.server.clangd.rpc import JsonRpcConnection, RpcError
from kernel_lsp.server.clangd.semantic_tokens import (
    TOKEN_MODIFIERS,
    TOKEN_TYPES,
    LegendMap,
    decode,
    encode,
    in_range,
    remap,
)


async def connected_pair(on_a=None, on_b=None):
    """Two connections talking over a socket pair: (a, b, what b received)."""
    left, right = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=left)
    rb, wb = await asyncio.open_connection(sock=right)
    received: list[tuple[str, object]] = []

    def note(method, params):
        received.append((method, params))

    a = JsonRpcConnection(ra, wa, on_a or (lambda m, p: None))
    b = JsonRpcConnection(rb, wb, on_b or note, on_request=lambda m, p: {"echo": p} if m == "echo" else None)
    tasks = [asyncio.ensure_future(a.serve()), asyncio.ensure_future(b.serve())]
    return a, b, received, tasks


async def test_requests_notifications_and_errors():
    a, b, received, tasks = await connected_pair()
    # Unicode and a large body survive the framing (Content-Length counts bytes).
    big = {"text": "∑ threadIdx " * 20000}
    assert await a.call("echo", big) == {"echo": big}
    a.notify("note", [1, 2])
    with pytest.raises(RpcError) as e:
        # The peer answers requests it has no answer for with "method not found".
        b._on_request = None
        await a.call("unknown", {})
    assert e.value.code == -32601
    await asyncio.sleep(0.05)
    assert received == [("note", [1, 2])]
    # Closing one end fails what the other still waits for, and marks it closed.
    _, pending = a.request("never-answered-because-closing", None)
    b.close()
    with pytest.raises(RpcError):
        await asyncio.wait_for(pending, 5)
    assert a.closed
    for t in tasks:
        t.cancel()


class RecordingPeer(JsonRpcConnection):
    """A peer that answers nothing and records every message it receives, as sent."""

    def __init__(self, reader, writer) -> None:
        super().__init__(reader, writer)
        self.messages: list[dict] = []

    def _dispatch(self, message: dict) -> None:
        self.messages.append(message)


async def test_a_cancelled_call_is_cancelled_at_the_peer_and_order_is_kept():
    left, right = socket.socketpair()
    a = JsonRpcConnection(*await asyncio.open_connection(sock=left))
    peer = RecordingPeer(*await asyncio.open_connection(sock=right))
    tasks = [asyncio.ensure_future(a.serve()), asyncio.ensure_future(peer.serve())]
    process = type("Process", (), {"pid": 0, "returncode": None})()
    session = Session(process, a)
    session.start()
    session.enqueue(lambda: a.notify("textDocument/didChange", {"v": 2}))
    call = asyncio.ensure_future(session.call("textDocument/completion", {"x": 1}))
    await asyncio.sleep(0.1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.1)
    # didChange first, then the request, then its cancellation with the request's id.
    change, request, cancel = peer.messages
    assert change["method"] == "textDocument/didChange" and "id" not in change
    assert request["method"] == "textDocument/completion" and request["params"] == {"x": 1}
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request["id"]}}
    assert a.in_flight == 0
    # A call cancelled before it left the queue never reaches the peer.
    session.enqueue(lambda: asyncio.sleep(0.2))
    queued = asyncio.ensure_future(session.call("textDocument/hover", {}))
    await asyncio.sleep(0.05)
    queued.cancel()
    await asyncio.sleep(0.3)
    assert len(peer.messages) == 3
    for t in (*tasks, *session._tasks):
        t.cancel()


def test_tokens_round_trip_and_range():
    tokens = [(0, 4, 5, 3, 2), (0, 12, 1, 2, 0), (3, 2, 4, 0, 1), (3, 9, 2, 19, 0)]
    data = encode(tokens)
    assert data[:10] == [0, 4, 5, 3, 2, 0, 8, 1, 2, 0]
    assert decode(data) == tokens
    assert decode(in_range({"data": data}, (0, 10), (3, 8))["data"]) == [(0, 12, 1, 2, 0), (3, 2, 4, 0, 1)]


def test_another_legend_is_mapped_by_name():
    same = LegendMap({"tokenTypes": list(TOKEN_TYPES), "tokenModifiers": list(TOKEN_MODIFIERS)})
    assert same.identity and remap({"data": [0, 0, 1, 5, 0]}, same) == {"data": [0, 0, 1, 5, 0]}
    # A clangd whose legend is ordered differently, with a type we never advertised.
    other = LegendMap(
        {"tokenTypes": ["macro", "brandNew", "function"], "tokenModifiers": ["readonly", "declaration"]}
    )
    assert not other.identity
    data = encode([(1, 0, 3, 0, 0b01), (1, 5, 2, 1, 0), (2, 1, 4, 2, 0b10)])
    out = remap({"resultId": "7", "data": data}, other)
    assert "resultId" not in out  # no delta may build on a remapped result
    readonly, declaration = 1 << TOKEN_MODIFIERS.index("readonly"), 1 << TOKEN_MODIFIERS.index("declaration")
    assert decode(out["data"]) == [
        (1, 0, 3, TOKEN_TYPES.index("macro"), readonly),
        (2, 1, 4, TOKEN_TYPES.index("function"), declaration),
    ]


def test_clangd_malloc_settings_unless_the_user_set_them(monkeypatch):
    # A fixed mmap threshold keeps the parser's big buffers out of the heap (issue 33: clangd's
    # idle PSS 337 -> 209 MiB); the user's own setting wins.
    from kernel_lsp.server.clangd.proxy import clangd_environment

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    env = clangd_environment()
    assert env["MALLOC_MMAP_THRESHOLD_"] == "65536" and env["MALLOC_ARENA_MAX"] == "2"
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert clangd_environment()["MALLOC_MMAP_THRESHOLD_"] == "1048576"
