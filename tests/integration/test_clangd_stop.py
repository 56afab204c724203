"""Stopping clangd at the worst moment: as its answer to `initialize` arrives. asyncio.wait_for
(Python 3.11) then returns the answer and drops the cancellation; the launch went on to a clangd
that nobody stopped, and the server never answered `shutdown` (CI hung on it). A fake clangd
(a Python script that speaks LSP) stands in for the real one."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from process_state import gone

from kernel_lsp.server.clangd import proxy as proxy_module
from kernel_lsp.server.clangd.binary import ClangdBinary
from kernel_lsp.server.clangd.proxy import ClangdProxy
from kernel_lsp.server.clangd.rpc import JsonRpcConnection

FAKE_CLANGD = """\
import json, os, sys, time
open(os.environ["FAKE_CLANGD_PID"], "w").write(str(os.getpid()))
if os.environ.get("FAKE_CLANGD_TMPDIR"):  # where its temporary files (preambles) would go
    open(os.environ["FAKE_CLANGD_TMPDIR"], "w").write(os.environ.get("TMPDIR", ""))
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    length = None
    while True:
        line = inp.readline()
        if not line:
            sys.exit(0)
        if line in (b"\\r\\n", b"\\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    message = json.loads(inp.read(length))
    if message.get("method") == "exit":
        time.sleep(float(os.environ.get("FAKE_CLANGD_LINGER_S", "0")))  # a parse it finishes first
        sys.exit(0)
    if "id" in message:
        result = {"capabilities": {}} if message["method"] == "initialize" else None
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        out.write(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
        out.flush()
"""


def _server() -> SimpleNamespace:
    settings = SimpleNamespace(clangd_enabled=True, clangd_background_index=False, clangd_diagnostics="off")
    workspace = SimpleNamespace(root_uri=None, folders={}, position_encoding="utf-16", text_documents={})
    return SimpleNamespace(settings=settings, workspace=workspace, client_capabilities=None)


def _fake_proxy(tmp_path: Path, monkeypatch) -> tuple[ClangdProxy, Path]:
    """A proxy whose clangd is FAKE_CLANGD, and the file its pid will be in."""
    script = tmp_path / "fake_clangd.py"
    script.write_text(FAKE_CLANGD)
    binary = tmp_path / "clangd"
    binary.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    binary.chmod(0o755)
    pid_file = tmp_path / "clangd.pid"
    monkeypatch.setenv("FAKE_CLANGD_PID", str(pid_file))
    monkeypatch.setattr(proxy_module, "clangd_environment", lambda: dict(os.environ))
    proxy = ClangdProxy(_server())
    proxy.binary, proxy.advertised, proxy._ready = ClangdBinary(str(binary), "test"), True, asyncio.Event()
    return proxy, pid_file


async def test_a_clangd_still_parsing_after_exit_is_ended_at_once_and_its_files_go(tmp_path: Path, monkeypatch):
    """clangd answers `shutdown` at once, then finishes the parse in progress before it exits
    (a CUDA file's preamble: over a second); the server's shutdown waited for that. Its temporary
    files (preambles on disk) are in the proxy's private folder, removed by the stop."""
    monkeypatch.setenv("FAKE_CLANGD_LINGER_S", "30")
    told = tmp_path / "tmpdir.txt"
    monkeypatch.setenv("FAKE_CLANGD_TMPDIR", str(told))
    proxy, pid_file = _fake_proxy(tmp_path, monkeypatch)
    proxy.start()
    await asyncio.wait_for(proxy._ready.wait(), 30)
    folder = proxy._database.folder
    assert told.read_text().startswith(folder + os.sep) and os.path.isdir(told.read_text())
    started = time.monotonic()
    await asyncio.wait_for(proxy.stop(), 20)
    took = time.monotonic() - started
    # Before, it waited STOP_TIMEOUT_S (3 s) and then killed; now EXIT_GRACE_S (0.2 s).
    assert took < proxy_module.STOP_TIMEOUT_S, f"the stop waited {took:.1f} s for clangd"
    assert gone(int(pid_file.read_text()), 10), "the fake clangd outlived the stop"
    assert not os.path.exists(folder)


async def test_a_stop_as_clangd_answers_initialize_ends_clangd(tmp_path: Path, monkeypatch):
    proxy, pid_file = _fake_proxy(tmp_path, monkeypatch)
    stopping: list[asyncio.Task] = []
    dispatch = JsonRpcConnection._dispatch

    def stop_as_initialize_is_answered(connection, message: dict) -> None:
        dispatch(connection, message)
        if not stopping and "capabilities" in (message.get("result") or {}):
            # Scheduled now, it runs in the step where wait_for's waiter is released.
            stopping.append(asyncio.ensure_future(proxy.stop()))

    monkeypatch.setattr(JsonRpcConnection, "_dispatch", stop_as_initialize_is_answered)
    proxy.start()
    for _ in range(600):
        if stopping:
            break
        await asyncio.sleep(0.05)
    assert stopping, "the fake clangd never answered initialize"
    await asyncio.wait_for(stopping[0], 20)  # the stop ends; before the fix it waited forever
    pid = int(pid_file.read_text())
    assert proxy.session is None and proxy._supervisor is None
    assert gone(pid, 10), "the fake clangd outlived the stop"
