"""Opening a folder in the editor must not run its code (issue 19): the real server as a
subprocess, a marker file as the proof. The start-up walk and the watcher read specs without
running them; a spec runs when the user opens its kernel file (unless `specs.run` is "never");
hostile defines (compile_commands.json, the editor's setting), launch comments and `#define`
values run nothing; `--tcp` serves only the editor that holds the token; a spec skeleton is not
written out of the workspace through a link."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import BASE_OPTIONS, REPO, diagnostics, open_file, start, uri
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernel_lsp.compile import find_toolchain

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

KERNEL = "__global__ void k(float* x, int n) { x[0] = 1.0f; }\n"
MARKING_SPEC = """\
import pathlib
pathlib.Path({marker!r}).write_text("the spec ran")
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(kernel="k", sizes=[{{"n": 4}}], args={{"x": Out("float32", shape="n"), "n": Scalar("int32")}},
            reference=lambda **_: {{"x": 0}})
"""
HOST_CU = "#include <cstdio>\n__global__ void k(int* p) { *p = EVIL; }\nint main() { return 0; }\n"
ESCAPE = (
    "([c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'catch_warnings'][0]()"
    "._module.__builtins__['__import__']('os').system('touch {marker}'))"
)


def spec_folder(root: Path) -> tuple[Path, Path]:
    marker = root.parent / f"{root.name}-MARKER"  # outside the watched folder: no event of its own
    (root / "k.cu").write_text(KERNEL)
    (root / "k.spec.py").write_text(MARKING_SPEC.format(marker=str(marker)))
    return root / "k.cu", marker


async def published(client: LanguageClient, path: Path, timeout: float = 90.0):
    """The diagnostics the server published for `path` (its check, spec included, is done)."""
    return await diagnostics(client, uri(path), timeout=timeout)


async def test_the_start_up_walk_reads_a_spec_without_running_it(client: LanguageClient, tmp_path):
    cu, marker = spec_folder(tmp_path)
    await start(client, tmp_path)
    await published(client, cu)  # the walk checked k.cu (closed) with its spec
    assert not marker.exists()
    # The user opens the kernel file: that is the action that lets its spec run. Its check may
    # publish more than once (the start-up walk's own result may land after the open, and a
    # first look comes before nvcc's verdict): the spec has run by the publication of the check
    # that ran it, within the usual wait.
    open_file(client, cu)
    deadline = time.monotonic() + 90.0
    while not marker.exists() and time.monotonic() < deadline:
        client.diagnostics.pop(uri(cu), None)
        await published(client, cu, timeout=max(1.0, deadline - time.monotonic()))
    assert marker.read_text() == "the spec ran"


async def test_specs_run_never_runs_no_spec_even_when_the_file_is_opened(client: LanguageClient, tmp_path):
    cu, marker = spec_folder(tmp_path)
    await start(client, tmp_path, options={**BASE_OPTIONS, "specs": {"run": "never"}})
    open_file(client, cu)
    await published(client, cu)
    assert not marker.exists()
    # A spec error that only running it shows is not there; what reading it shows still is.
    (tmp_path / "k.spec.py").write_text("SPEC = Spec(kernel='nope'\n")
    open_file(client, tmp_path / "k.spec.py", version=1)
    found = await diagnostics(client, uri(tmp_path / "k.spec.py"), until=lambda ds: len(ds) > 0)
    assert "syntax error in spec" in found[0].message


async def test_the_watcher_does_not_run_a_spec_that_changes_on_disk(client: LanguageClient, tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(KERNEL)
    await start(client, tmp_path)
    await published(client, cu)
    marker = tmp_path.parent / f"{tmp_path.name}-MARKER"
    client.diagnostics.pop(uri(cu), None)
    (tmp_path / "k.spec.py").write_text(MARKING_SPEC.format(marker=str(marker)))  # a `git pull`
    await published(client, cu)  # the watcher re-checked k.cu with its new spec
    assert not marker.exists()


@needs_nvcc
async def test_a_hostile_define_in_compile_commands_runs_nothing_on_folder_open(
    client: LanguageClient, tmp_path
):
    marker = tmp_path.parent / f"{tmp_path.name}-MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    entry = {
        "directory": str(tmp_path),
        "file": "k.cu",
        "arguments": ["nvcc", f"-DEVIL=1/*$(touch {marker})`touch {marker}`*/", "-c", "k.cu"],
    }
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry]))
    await start(client, tmp_path)
    found = await published(client, tmp_path / "k.cu")
    assert not marker.exists()
    assert found == []  # compiled by nvcc, with EVIL defined as the database says


@needs_nvcc
async def test_a_hostile_define_in_the_editors_setting_runs_nothing(client: LanguageClient, tmp_path):
    marker = tmp_path.parent / f"{tmp_path.name}-MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    define = f"EVIL=1/*$(touch {marker})`touch {marker}`*/"
    await start(client, tmp_path, options={**BASE_OPTIONS, "defines": [define]})
    open_file(client, tmp_path / "k.cu")
    found = await published(client, tmp_path / "k.cu")
    assert not marker.exists()
    assert found == []


async def test_a_hostile_launch_comment_and_define_run_nothing(client: LanguageClient, tmp_path):
    """Opened, with a spec that runs: the launch comment and the `#define` are only read."""
    marker = tmp_path.parent / f"{tmp_path.name}-MARKER"
    spec_marker = tmp_path.parent / f"{tmp_path.name}-SPEC"
    source = (
        f"#define BLOCK {ESCAPE.format(marker=marker)}\n"
        f"// kernel-lsp: launch k grid=cdiv(n, BLOCK) block={ESCAPE.format(marker=marker)}\n" + KERNEL
    )
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "k.spec.py").write_text(MARKING_SPEC.format(marker=str(spec_marker)))
    await start(client, tmp_path)
    open_file(client, tmp_path / "k.cu")
    await diagnostics(
        client, uri(tmp_path / "k.cu"), until=lambda ds: any("is not allowed" in d.message for d in ds)
    )
    await diagnostics(client, uri(tmp_path / "k.spec.py"), until=lambda ds: True)
    assert spec_marker.exists()  # the check that read them ran the spec: it was the user's action
    assert not marker.exists()


async def test_no_spec_skeleton_out_of_the_workspace_through_a_link(client: LanguageClient, tmp_path):
    outside, workspace = tmp_path / "outside", tmp_path / "ws"
    outside.mkdir()
    workspace.mkdir()
    (outside / "k.cu").write_text(KERNEL)
    (workspace / "linked").symlink_to(outside)
    await start(client, workspace)
    cu = workspace / "linked" / "k.cu"
    open_file(client, cu)
    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelLsp.writeSpecSkeleton", arguments=[{"uri": uri(cu), "kernel": "k"}]
        )
    )
    reply = reply if isinstance(reply, dict) else reply._asdict()
    assert reply["created"] is False and "outside the workspace" in reply["message"]
    assert sorted(p.name for p in outside.iterdir()) == ["k.cu"]


# --- --tcp ----------------------------------------------------------------------------------


class Wire:
    """A bare LSP connection: framed JSON both ways, server requests answered with null."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.diagnostics: dict[str, list] = {}
        self.responses: dict[int, dict] = {}
        self.closed = asyncio.Event()
        self.task = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, port: int) -> Wire:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params, timeout: float = 60.0) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = asyncio.get_running_loop().time() + timeout
        while rid not in self.responses:
            if self.closed.is_set() or asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no answer to {method}")
            await asyncio.sleep(0.02)
        return self.responses[rid]

    async def _read(self) -> None:
        try:
            while True:
                length = 0
                while (line := await self.reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if not line:
                    break
                message = json.loads(await self.reader.readexactly(length))
                if "id" in message and "method" in message:  # a request of the server's
                    self.send({"id": message["id"], "result": None})
                elif "id" in message:
                    self.responses[message["id"]] = message
                elif message.get("method") == "textDocument/publishDiagnostics":
                    self.diagnostics[message["params"]["uri"]] = message["params"]["diagnostics"]
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()

    async def session(self, root: Path, token: str | None) -> dict:
        options = {**BASE_OPTIONS, **({"token": token} if token is not None else {})}
        params = {
            "processId": None,
            "rootUri": root.as_uri(),
            "capabilities": {},
            "initializationOptions": options,
        }
        return await self.request("initialize", params)

    def open(self, path: Path, text: str | None = None) -> None:
        item = {"uri": uri(path), "languageId": "cuda", "version": 1, "text": text or path.read_text()}
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})

    async def published(self, path: Path, timeout: float = 90.0) -> list:
        deadline = asyncio.get_running_loop().time() + timeout
        while uri(path) not in self.diagnostics:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no diagnostics for {path.name}")
            await asyncio.sleep(0.02)
        return self.diagnostics[uri(path)]

    def close(self) -> None:
        self.writer.close()


_drains: set[asyncio.Future] = set()


async def tcp_server(tmp_path: Path, *args: str) -> tuple[asyncio.subprocess.Process, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kernel_lsp", "--tcp", "127.0.0.1:0", *args,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line, "the server ended before listening"
        if "listening on" in line:
            port = int(line.split("listening on ", 1)[1].split(";")[0].split(",")[0].rsplit(":", 1)[1])
            _drains.add(asyncio.ensure_future(proc.stderr.read()))  # keep draining its log
            return proc, port


async def test_tcp_serves_only_the_editor_with_the_token(tmp_path):
    token_file = tmp_path / "token"
    work = tmp_path / "ws"
    work.mkdir()
    proc, port = await tcp_server(tmp_path, "--token-file", str(token_file))
    try:
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        editor = await Wire.connect(port)
        assert "result" in await editor.session(work, token)
        editor.send({"method": "initialized", "params": {}})
        (work / "ok.cu").write_text(KERNEL)
        editor.open(work / "ok.cu")
        assert await editor.published(work / "ok.cu") == []

        # Someone else on this machine: a spec sent as unsaved editor text, with its kernel file.
        intruder_marker = tmp_path / "INTRUDER"
        (work / "x.cu").write_text(KERNEL)
        for first in ("didOpen", "no token", "wrong token"):
            intruder = await Wire.connect(port)
            if first == "didOpen":
                intruder.open(work / "x.spec.py", MARKING_SPEC.format(marker=str(intruder_marker)))
            else:
                reply = await intruder.session(work, None if first == "no token" else "x" * 43)
                assert "token is missing or wrong" in reply["error"]["message"]
            await asyncio.wait_for(intruder.closed.wait(), 30)  # closed by the server
        # The same with the token while the editor is connected: one editor at a time.
        second = await Wire.connect(port)
        reply = await second.session(work, token)
        assert "another editor is connected" in reply["error"]["message"]
        await asyncio.wait_for(second.closed.wait(), 30)

        # The editor is unaffected, and what the intruders sent would have run had it been the
        # editor's: the same spec as the editor's unsaved text runs.
        editor_marker = tmp_path / "EDITOR"
        editor.open(work / "x.spec.py", MARKING_SPEC.format(marker=str(editor_marker)))
        editor.open(work / "x.cu")
        await editor.published(work / "x.cu")
        assert editor_marker.exists() and not intruder_marker.exists()

        # The editor's connection drops without shutdown: the server waits for the next one.
        editor.close()
        await asyncio.sleep(0.5)
        assert proc.returncode is None
        again = await Wire.connect(port)
        assert "result" in await again.session(work, token)
        assert "result" in await again.request("shutdown", None)
        again.send({"method": "exit", "params": None})
        assert await asyncio.wait_for(proc.wait(), 30) == 0  # the editor asked: it ends
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_tcp_refuses_other_machines_and_a_token_file_others_can_read(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    async def run(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kernel_lsp", *args, stderr=asyncio.subprocess.PIPE, env=env
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, err.decode()

    code, err = await run("--tcp", "0.0.0.0:0")
    assert code == 2 and "loopback address only" in err
    loose = tmp_path / "token"
    loose.write_text("a-token-of-sufficient-length\n")
    loose.chmod(0o644)
    code, err = await run("--tcp", "127.0.0.1:0", "--token-file", str(loose))
    assert code == 2 and "can be read by other users" in err and "chmod 600" in err


# --- with a GPU: verification runs the spec too, so it follows the same rule ----------------------


def timed(title: str) -> bool:
    return ("ms" in title or "us" in title) and "roofline" in title


@pytest.mark.gpu
async def test_gpu_verification_waits_for_the_user_to_open_the_file(client: LanguageClient, tmp_path):
    """The start-up walk compiles a closed spec'd file cleanly; with a GPU up, it is still not
    verified (the GPU worker would load its spec). Opening it verifies it, spec and all."""
    from fixture_sources import VADD

    statuses: list[dict] = []

    @client.feature("kernelLsp/status")
    def on_status(params) -> None:
        statuses.append(params if isinstance(params, dict) else params._asdict())

    marker = tmp_path.parent / f"{tmp_path.name}-MARKER"
    cu = tmp_path / "vadd.cu"
    cu.write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        "SPEC = Spec(kernel='vadd', sizes=[{'n': 1}, {'n': 1000}],\n"
        "    args={'a': In('float32'), 'b': In('float32'), 'c': Out('float32'), 'n': Scalar('int32')},\n"
        "    reference=lambda a, b, **_: {'c': a + b})\n"
    )
    await start(client, tmp_path, options={"arch": "auto", "gpu": {"enabled": True}})
    assert await published(client, cu) == []  # the walk's compile: clean
    deadline = time.monotonic() + 120
    while not any(s.get("device") for s in statuses) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert any(s.get("device") for s in statuses), f"no GPU came up: {statuses}"
    await asyncio.sleep(5.0)  # time enough for a verification to have started
    assert not marker.exists()

    u = open_file(client, cu)
    deadline = time.monotonic() + 180
    titles: list[str] = []
    while time.monotonic() < deadline:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
        )
        titles = [lens.command.title for lens in lenses or [] if lens.command]
        if any(timed(t) for t in titles):
            break
        await asyncio.sleep(0.5)
    assert any(timed(t) for t in titles), titles  # verified and timed
    assert marker.exists()
