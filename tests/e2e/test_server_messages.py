"""What the server says in hover and how often it publishes (issue 14, items 11 and 25), through
the real server process."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from conftest import BASE_OPTIONS, change_and_save, diagnostics, open_file, server_env, start, uri
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

KERNEL = (
    "__global__ void scale(float* x, int n)\n{\n    int i = threadIdx.x;\n    if (i < n) x[i] *= 2.0f;\n}\n"
)


def _count_publications(client: LanguageClient) -> dict[str, list[int | None]]:
    """Every publishDiagnostics the client gets, per uri (pytest-lsp keeps only the last)."""
    seen: dict[str, list[int | None]] = {}
    features = client.protocol.fm.features
    original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def counting(params: types.PublishDiagnosticsParams):
        seen.setdefault(params.uri, []).append(params.version)
        return original(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = counting
    return seen


async def _hover(client: LanguageClient, u: str, line: int, character: int) -> str:
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u),
            position=types.Position(line=line, character=character),
        )
    )
    return hover.contents.value


async def test_an_open_file_gets_its_diagnostics_once(client: LanguageClient, tmp_path: Path):
    # The workspace watcher's start-up check and didOpen both check the file: the second result
    # is the same, and publishing it again made editors redraw (and Neovim re-notify).
    (tmp_path / "a.cu").write_text(KERNEL)
    (tmp_path / "b.cu").write_text(KERNEL.replace("scale", "other"))
    seen = _count_publications(client)
    await start(client, tmp_path)
    u = open_file(client, tmp_path / "a.cu")
    await diagnostics(client, u)
    await diagnostics(client, uri(tmp_path / "b.cu"))
    for _ in range(100):  # let every check in flight finish
        if (await client.protocol.send_request_async("kernelLsp/stats", None)).inFlight == 0:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    # A start-up check from disk may come first (version None) if the walk beats didOpen; the
    # editor's version is published once.
    assert seen[u].count(1) == 1 and len(seen[u]) <= 2, seen


async def test_hover_on_a_file_over_the_size_limit_says_why(client: LanguageClient, tmp_path: Path):
    await start(client, tmp_path, options={**BASE_OPTIONS, "maxFileBytes": 200})
    text = KERNEL + "// padding\n" * 30
    path = tmp_path / "big.cu"
    path.write_text(text)
    u = open_file(client, path)
    await diagnostics(client, u, lambda ds: len(ds) > 0)
    value = await _hover(client, u, 0, 17)
    assert "not compiled yet" not in value and "limit" in value, value


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "kernel_lsp"],
        server_env={**server_env(), "PATH": "/usr/bin:/bin"},
    )
)
async def gpu_on(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_hover_without_a_gpu_says_so_in_a_few_words(gpu_on: LanguageClient, tmp_path: Path):
    # GPU checks on, on a machine without one: hover says "no GPU: ..." once, without the
    # driver loader's paragraph.
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: hover shows its figures, not why there are none")
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    await start(gpu_on, tmp_path, options={"arch": ["sm_90"], "gpu": {"enabled": True}})
    u = open_file(gpu_on, path)
    await diagnostics(gpu_on, u)
    for _ in range(100):
        value = await _hover(gpu_on, u, 0, 17)
        if "probe has not answered" not in value:
            break
        await asyncio.sleep(0.1)
    assert "_No GPU figures (no GPU: " in value, value
    assert "system search" not in value and "Ensure" not in value and ".." not in value


async def test_a_misspelled_launch_comment_is_a_diagnostic_in_the_editor(
    client: LanguageClient, tmp_path: Path
):
    path = tmp_path / "k.cu"
    path.write_text("// kernel-lsp: launch scal grid=cdiv(n, 256) block=256\n" + KERNEL)
    await start(client, tmp_path)
    u = open_file(client, path)
    (d,) = await diagnostics(client, u, lambda ds: len(ds) > 0)
    assert d.code == "launch-comment" and d.range.start.line == 0 and "did you mean `scale`?" in d.message


def _compile_workers(server_pid: int) -> list[int]:
    """The server's spawned compile workers (multiprocessing's resource tracker is not one)."""
    found = []
    for child in Path("/proc").glob("[0-9]*"):
        try:
            status = (child / "status").read_text()
            cmdline = (child / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("PPid:")), 0)
        if ppid == server_pid and "spawn_main" in cmdline:
            found.append(int(child.name))
    return found


async def test_idle_compile_workers_end_and_start_again(client: LanguageClient, tmp_path: Path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    await start(client, tmp_path, options={**BASE_OPTIONS, "workerIdleSeconds": 1})
    u = open_file(client, path)
    assert await diagnostics(client, u) == []
    stats = await client.protocol.send_request_async("kernelLsp/stats", None)
    pid = stats.pid
    assert stats.workersRunning and _compile_workers(pid), "the check ran in spawned workers"
    for _ in range(100):
        stats = await client.protocol.send_request_async("kernelLsp/stats", None)
        if not stats.workersRunning and not _compile_workers(pid):
            break
        await asyncio.sleep(0.1)
    assert stats.idleStops >= 1 and not stats.workersRunning, stats
    assert _compile_workers(pid) == []
    # The next check starts them again.
    client.diagnostics.pop(u)
    change_and_save(client, path, KERNEL.replace("x[i] *= 2.0f", "x[i] *= undefined_factor"), version=2)
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert "undefined_factor" in d.message


async def test_status_is_sent_only_when_it_changes(gpu_on: LanguageClient, tmp_path: Path):
    # Neovim users show kernelLsp/status with vim.notify: repeats popped 3-4 notifications per
    # file open. The GPU probe, every check and the watcher each ended with the same idle status.
    statuses: list[dict] = []

    @gpu_on.feature("kernelLsp/status")
    def on_status(params) -> None:
        statuses.append(params if isinstance(params, dict) else params._asdict())

    for name in ("a.cu", "b.cu"):
        (tmp_path / name).write_text(KERNEL.replace("scale", name[0] + "_scale"))
    await start(gpu_on, tmp_path, options={"arch": ["sm_90"], "gpu": {"enabled": True}})
    for name in ("a.cu", "b.cu"):
        await diagnostics(gpu_on, open_file(gpu_on, tmp_path / name))
    await asyncio.sleep(1.0)
    assert statuses, "the server sent no status"
    repeats = [a for a, b in itertools.pairwise(statuses) if a == b]
    assert repeats == [], statuses
