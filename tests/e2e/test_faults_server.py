"""Faults and bad input through the real server (issue 23): each case gets its verdict and its
message, the server answers the next request, nothing it started outlives it, and a broken
stream ends it (so that the client restarts it) instead of silencing it."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import pytest_lsp
from conftest import BASE_OPTIONS, change_and_save, diagnostics, open_file, server_env, start, stats, uri
from fault_inputs import (
    KERNEL,
    MACRO_BOMB,
    MEMORY_BOMB,
    NUL_AFTER_8K,
    NUL_LINE,
    SLEEPING_SPEC,
    alive,
    descendants,
    wait_gone,
)
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

pytestmark = pytest.mark.slow  # the slow tier (waits out deadlines, hangs and memory limits): python -m pytest -m slow

# --- a client that writes raw bytes -----------------------------------------------------------


class RawServer:
    """The server over pipes, for what pytest-lsp cannot send: broken frames, params of the
    wrong type. Server-to-client requests are answered with null."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.log = cwd / "stderr.log"
        self._stderr = open(self.log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_lsp", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=server_env(),
        )
        self.messages: queue.Queue[dict] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                return
            message = json.loads(out.read(length))
            if "method" in message and "id" in message:  # a request to the client
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            self.messages.put(message)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def request(self, method: str, params, timeout: float = 30.0) -> dict:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = self.messages.get(timeout=0.1)
            except queue.Empty:
                continue
            if m.get("id") == self._next_id and "method" not in m:
                return m
        raise AssertionError(f"no reply to {method} in {timeout} s")

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self, root: Path, options: dict | None = None) -> None:
        params = {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": {},
            "initializationOptions": options or BASE_OPTIONS,
        }
        assert "result" in self.request("initialize", params)
        self.notify("initialized", {})

    def open(self, path: Path) -> str:
        item = {"uri": uri(path), "languageId": "cuda", "version": 1, "text": path.read_text()}
        self.notify("textDocument/didOpen", {"textDocument": item})
        return item["uri"]

    def wait_diagnostics(self, u: str, timeout: float = 60.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = self.messages.get(timeout=0.1)
            except queue.Empty:
                continue
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == u:
                return m["params"]["diagnostics"]
        raise AssertionError(f"no diagnostics for {u}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()


@pytest.fixture
def raw(tmp_path):
    servers: list[RawServer] = []

    def make(*args: str) -> RawServer:
        servers.append(RawServer(tmp_path, *args))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


# --- the protocol -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        b"Content-Length: abc\r\n\r\n{}",
        b"Content-Length: -5\r\n\r\n{}",
        b'Content-Type: application/vscode-jsonrpc\r\n\r\n{"jsonrpc": "2.0", "id": 9, "method": "shutdown"}',
    ],
    ids=["not-a-number", "negative", "missing"],
)
def test_a_framing_error_ends_the_server_with_a_log_line(raw, tmp_path, frame):
    server = raw()
    server.initialize(tmp_path)
    server.send_raw(frame)
    # Before: the process stayed up and never answered again, and the client could not tell.
    assert server.proc.wait(15) == 1
    assert "LSP framing error" in server.log.read_text()


def test_a_request_with_bad_params_gets_an_error_and_the_next_one_an_answer(raw, tmp_path):
    server = raw()
    server.initialize(tmp_path)
    reply = server.request("textDocument/hover", "a string")  # before: never answered
    assert reply["error"]["code"] == -32602 and "textDocument/hover" in reply["error"]["message"]
    assert server.request("kernelLsp/stats", None)["result"]["compiles"] >= 0
    not_json = b"{not json"
    server.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(not_json), not_json))
    assert server.request("kernelLsp/stats", None)["result"]["compiles"] >= 0
    assert server.proc.poll() is None


# --- processes --------------------------------------------------------------------------------


def test_a_killed_server_leaves_no_process_behind(raw, tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k.spec.py").write_text(SLEEPING_SPEC)
    server = raw()
    server.initialize(tmp_path)
    server.open(tmp_path / "k.cu")  # the user's action: its spec runs
    pid_file = tmp_path / "sleep.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    sleep_pid = int(pid_file.read_text())
    tree = descendants(server.proc.pid)
    # Compile workers, the resource tracker, and the spec's own `sleep`.
    assert sleep_pid in tree and len(tree) >= 3, tree
    server.proc.send_signal(signal.SIGKILL)  # an editor that crashed
    server.proc.wait(10)
    # Before: the workers and the resource tracker (268 MB) and the sleep ran on.
    assert wait_gone(tree, 5.0) == set()
    assert not alive(sleep_pid)


# --- files and compiles (pytest-lsp's client) -------------------------------------------------


async def still_answers(client: LanguageClient) -> dict:
    return await asyncio.wait_for(stats(client), 10)


async def test_a_fifo_named_cuh_does_not_block_the_start_or_the_exit(client: LanguageClient, tmp_path):
    (tmp_path / "ok.cu").write_text(KERNEL)
    os.mkfifo(tmp_path / "pipe.cuh")
    os.mkfifo(tmp_path / ".gitignore")  # read by the walk too
    await start(client, tmp_path)  # the start-up walk reads every .cuh: before, it blocked in open()
    (d,) = await diagnostics(client, uri(tmp_path / "pipe.cuh"), until=lambda ds: len(ds) > 0)
    assert d.message == "not checked: the file is a FIFO (named pipe), not a regular file"
    assert d.severity == types.DiagnosticSeverity.Error
    await still_answers(client)
    # The fixture then asserts that shutdown/exit end the process (before: it never exited).


async def test_an_include_of_a_fifo_is_an_error_at_the_include(client: LanguageClient, tmp_path):
    os.mkfifo(tmp_path / "p.cuh")
    path = tmp_path / "f.cu"
    path.write_text('// first\n#include "p.cuh"\n' + KERNEL)
    await start(client, tmp_path)
    u = open_file(client, path)
    (d,) = await diagnostics(client, u, until=lambda ds: len(ds) > 0, timeout=30)
    assert d.range.start.line == 1 and "is a FIFO (named pipe), not a regular file" in d.message
    await still_answers(client)


async def test_a_nul_past_8_kib_is_an_error_at_its_line(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "f.cu"
    path.write_bytes(NUL_AFTER_8K)
    u = open_file(client, path, NUL_AFTER_8K.decode())
    (d,) = await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert d.range.start.line == NUL_LINE - 1 and d.message.startswith(
        f"not checked: a NUL byte at line {NUL_LINE}"
    )
    await still_answers(client)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp"], server_env=server_env())
)
async def limited(lsp_client: LanguageClient):
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), 15)


async def test_a_slow_file_is_not_checked_in_time_and_that_is_never_cached(limited: LanguageClient, tmp_path):
    client = limited
    await start(client, tmp_path, options={**BASE_OPTIONS, "checkTimeoutSeconds": 3})
    path = tmp_path / "slow.cu"
    path.write_text(MACRO_BOMB)
    u = open_file(client, path)
    (d,) = await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert d.severity == types.DiagnosticSeverity.Information  # not a compile error
    assert d.message.startswith("not checked in time (3 s)") and "checkTimeoutSeconds" in d.message
    assert "spec" not in d.message  # before: "does the spec ... never return?" for a file with none
    before = (await still_answers(client))["compiles"]
    client.diagnostics.pop(u)
    change_and_save(client, path, MACRO_BOMB, version=2)  # the same text: compiled again
    await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert (await still_answers(client))["compiles"] == before + 1


async def test_a_compile_past_the_memory_limit_says_so_and_is_never_cached(limited: LanguageClient, tmp_path):
    client = limited
    await start(client, tmp_path, options={**BASE_OPTIONS, "compileMemoryMB": 512})
    path = tmp_path / "big.cu"
    path.write_text(MEMORY_BOMB)
    u = open_file(client, path)
    (d,) = await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert d.severity == types.DiagnosticSeverity.Information
    assert "ran out of memory at its limit of 512 MiB" in d.message and "compileMemoryMB" in d.message
    before = (await still_answers(client))["compiles"]
    client.diagnostics.pop(u)
    change_and_save(client, path, MEMORY_BOMB, version=2)  # before: the crash was served again
    await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert (await still_answers(client))["compiles"] == before + 1
    # A good file after it compiles.
    good = tmp_path / "good.cu"
    good.write_text(KERNEL.replace("1.0f", "y"))
    ug = open_file(client, good)
    assert any(
        '"y" is undefined' in x.message for x in await diagnostics(client, ug, until=lambda ds: len(ds) > 0)
    )


async def test_a_large_database_loads_without_stalling_requests(client: LanguageClient, tmp_path):
    """100,000 entries (~60 MB): the server keeps answering while it reads them (before, the
    event loop parsed it: 10 s without an answer for 300,000)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cu").write_text(KERNEL)
    command = "nvcc -DPROJ=1 -I{0}/include -I{0}/src/m{1} -O3 -std=c++17 -arch=sm_90 -o f{2}.o -c {0}/src/m{1}/f{2}.cu"
    with open(tmp_path / "compile_commands.json", "w") as f:
        f.write("[")
        for i in range(100_000):
            entry = {
                "directory": str(tmp_path),
                "command": command.format(tmp_path, i % 50, i),
                "file": f"src/m{i % 50}/f{i}.cu",
            }
            f.write(("," if i else "") + json.dumps(entry))
        f.write("]")
    await start(client, tmp_path)
    loop = asyncio.get_running_loop()
    opened = loop.time()
    u = open_file(client, src / "k.cu")
    latencies: list[float] = []
    while client.diagnostics.get(u) is None:
        t = loop.time()
        await still_answers(client)
        latencies.append(loop.time() - t)
        await asyncio.sleep(0.05)
    load = loop.time() - opened
    assert len(latencies) >= 3, (load, latencies)  # requests were answered while it loaded
    assert max(latencies) < load / 2, (load, latencies)  # none waited for the load


def test_a_log_file_inside_the_workspace_does_not_feed_itself(tmp_path):
    """`--log-file` inside the workspace at DEBUG: the watcher must not log the events of the log
    (before: 7 MB/s)."""
    log = tmp_path / "server.log"
    (tmp_path / "k.cu").write_text(KERNEL)
    server = RawServer(tmp_path, "--log-file", str(log), "--log-level", "DEBUG")
    try:
        server.initialize(tmp_path)
        server.wait_diagnostics(uri(tmp_path / "k.cu"))
        time.sleep(1.0)  # the watcher's batches settle
        size = log.stat().st_size
        time.sleep(2.0)
        grown = log.stat().st_size - size
        assert grown < 20_000, grown
        assert server.request("kernelLsp/stats", None)["result"]["compiles"] >= 1
    finally:
        server.close()
