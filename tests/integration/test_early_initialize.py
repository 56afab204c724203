"""`initialize` answered before pygls and lsprotocol load (issue 33: <= 0.2 s), from the answer
the server itself gave to the same params with the same code; the server's own answer is then
dropped, and every byte read early is handed on to the server's reader."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp import early_initialize
from kernel_lsp.early_initialize import answer_early

REPO = Path(__file__).resolve().parents[2]


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def initialize(request_id=1, options=None, pid=123) -> dict:
    params = {"processId": pid, "rootUri": None, "capabilities": {}, "initializationOptions": options or {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def answers(data: bytes) -> list[dict]:
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(head.split(b"\r\n")[0].split(b":")[1])
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("KERNEL_LSP_EARLY_INITIALIZE", raising=False)
    return tmp_path / "cache" / "kernel-lsp" / "initialize"


def test_a_first_start_answers_nothing_early_and_saves_the_servers_answer(cache):
    sent = frame(initialize()) + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    stdin, stdout = io.BytesIO(sent), io.BytesIO()
    early = answer_early(stdin, stdout)
    assert stdout.getvalue() == b""
    assert early.prefix == frame(initialize()) and stdin.read() == sent[len(early.prefix) :]
    reply = frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"hoverProvider": True}}})
    assert early.server_reply(reply)  # sent: nothing went out early
    assert [p.name for p in cache.iterdir()] == [early.key]
    # The next start, another editor process (processId) with the same params: answered at once.
    stdout = io.BytesIO()
    again = answer_early(io.BytesIO(frame(initialize(request_id="a", pid=999))), stdout)
    assert answers(stdout.getvalue()) == [
        {"jsonrpc": "2.0", "id": "a", "result": {"capabilities": {"hoverProvider": True}}}
    ]
    # The server's own answer is dropped (the client has one); others pass.
    other = frame({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "x"}})
    assert again.server_reply(other)
    assert not again.server_reply(
        frame({"jsonrpc": "2.0", "id": "a", "result": {"capabilities": {"hoverProvider": True}}})
    )
    assert again.server_reply(frame({"jsonrpc": "2.0", "id": "a", "result": None}))  # only once


def test_other_params_or_other_code_are_another_key(cache, monkeypatch):
    early = answer_early(io.BytesIO(frame(initialize())), io.BytesIO())
    early.server_reply(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}}))
    stdout = io.BytesIO()
    answer_early(io.BytesIO(frame(initialize(options={"clangd": {"enabled": False}}))), stdout)
    assert stdout.getvalue() == b""
    monkeypatch.setattr(early_initialize, "_code_stamp", lambda: "another version")
    answer_early(io.BytesIO(frame(initialize())), stdout)
    assert stdout.getvalue() == b""
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent.parent))
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + "/a/new/folder")  # clangd may be there
    answer_early(io.BytesIO(frame(initialize())), stdout)
    assert stdout.getvalue() == b""


def test_a_folder_never_opened_before_is_answered_from_another_folders_start(cache):
    """The key is what the answer is made of (issue 45: a new folder waited 0.47 s for pygls): the
    client's capabilities and the clangd settings, not the workspace, the client's name or the
    other settings (whose paths are the workspace's)."""

    def opened(folder: str, options: dict, capabilities: dict | None = None, **more) -> dict:
        message = initialize(options=options)
        message["params"].update(
            rootUri=f"file://{folder}",
            rootPath=folder,
            workspaceFolders=[{"uri": f"file://{folder}", "name": "ws"}],
            capabilities=capabilities or {},
            **more,
        )
        return message

    options_a = {"includeDirs": ["/a/include"], "clangd": {"enabled": True}, "gpu": {"enabled": False}}
    early = answer_early(io.BytesIO(frame(opened("/a", options_a))), io.BytesIO())
    early.server_reply(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"x": 1}}}))
    options_b = {"kernelLsp": {"includeDirs": ["/b/inc"], "clangd.enabled": True, "arch": "sm_80"}}
    stdout = io.BytesIO()
    answer_early(io.BytesIO(frame(opened("/b", options_b, clientInfo={"name": "Neovim"}))), stdout)
    assert answers(stdout.getvalue()) == [{"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"x": 1}}}]
    # What the answer is made of differs: another key.
    for other in (
        opened("/b", {"clangd": {"enabled": False}}),
        opened("/b", {"clangd": {"enabled": True, "path": "/opt/clangd"}}),
        opened("/b", options_b, {"general": {"positionEncodings": ["utf-8"]}}),
    ):
        stdout = io.BytesIO()
        answer_early(io.BytesIO(frame(other)), stdout)
        assert stdout.getvalue() == b"", other


def test_an_answer_that_changed_is_saved_for_the_next_start_and_errors_never(cache):
    early = answer_early(io.BytesIO(frame(initialize())), io.BytesIO())
    early.server_reply(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"a": 1}}}))
    late = answer_early(io.BytesIO(frame(initialize())), io.BytesIO())
    assert not late.server_reply(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"b": 2}}}))
    stdout = io.BytesIO()
    answer_early(io.BytesIO(frame(initialize())), stdout)
    assert answers(stdout.getvalue())[0]["result"] == {"capabilities": {"b": 2}}
    error = answer_early(io.BytesIO(frame(initialize(options={"clangd": {"enabled": False}}))), io.BytesIO())
    assert error.server_reply(frame({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no"}}))
    assert len(list(cache.iterdir())) == 1


@pytest.mark.parametrize(
    "sent",
    [
        frame({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}),  # not initialize
        frame({"jsonrpc": "2.0", "method": "initialize", "params": {}}),  # no id: nothing to answer
        b"Content-Length: abc\r\n\r\n{}",  # a framing error: the server's reader reports it
        b"Content-Length: 10\r\n\r\n{",  # the stream ends inside the body
        b"X" * 9000,  # a header line too long
        b"",
    ],
)
def test_anything_else_is_read_once_and_handed_on_unanswered(sent, cache):
    stdin, stdout = io.BytesIO(sent), io.BytesIO()
    early = answer_early(stdin, stdout)
    assert stdout.getvalue() == b"" and early.prefix + stdin.read() == sent
    assert early.server_reply(frame({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert not cache.exists()


def test_the_servers_reader_reads_the_prefix_then_stdin():
    import asyncio

    from kernel_lsp.server.transport import _StdinReader, read_message

    first, second = frame(initialize()), frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    reader = _StdinReader(io.BytesIO(first[10:] + second), prefix=first[:10])  # a line cut in two

    async def both():
        return [await read_message(reader), await read_message(reader), await read_message(reader)]

    try:
        assert asyncio.run(both()) == [first.split(b"\r\n\r\n")[1], second.split(b"\r\n\r\n")[1], None]
    finally:
        reader.close()


def start_server(env: dict, message: dict | None = None) -> list[dict]:
    """initialize (`message`), shutdown, exit through a real server: every message it wrote back."""
    message = message or initialize(options={"gpu": {"enabled": False}, "clangd": {"enabled": False}})
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_lsp"],
        input=frame(message)
        + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "exit"}),
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return answers(proc.stdout)


def test_a_real_server_answers_once_and_the_same_both_ways(tmp_path, cache):
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"))
    replies = [start_server(env) for _ in range(2)]
    for messages in replies:
        ids = [m.get("id") for m in messages if "method" not in m]
        assert ids == [1, 2]  # one answer to initialize, then shutdown's
    first, second = (next(m for m in r if m.get("id") == 1) for r in replies)
    assert first == second and "hoverProvider" in first["result"]["capabilities"]
    assert len(list(cache.iterdir())) == 1


def test_the_real_server_answers_alike_whatever_the_workspace_and_the_other_settings(tmp_path):
    """What makes sharing an answer between folders sound: the server's own answers (none sent
    early) to two starts that differ in all but `_answer_inputs` are the same."""
    env = dict(os.environ, PYTHONPATH=str(REPO), KERNEL_LSP_EARLY_INITIALIZE="0")
    results = []
    for folder, options in (
        (tmp_path / "a", {"gpu": {"enabled": False}, "includeDirs": ["/a/include"], "checkOn": "save"}),
        (tmp_path / "b", {"kernelLsp": {"gpu.enabled": False, "arch": "sm_80", "defines": ["X=1"]}}),
    ):
        folder.mkdir()
        message = initialize(options=options)
        message["params"].update(
            rootUri=folder.as_uri(),
            rootPath=str(folder),
            workspaceFolders=[{"uri": folder.as_uri(), "name": folder.name}],
            clientInfo={"name": folder.name},
        )
        reply = start_server(env, message)
        results.append(next(m for m in reply if m.get("id") == 1)["result"])
        assert early_initialize._answer_inputs(message["params"]) == early_initialize._answer_inputs(
            initialize(options={})["params"]
        )
    assert results[0] == results[1]
