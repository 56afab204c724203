"""Bad input through the real server: each case gets a clear message (or nothing, where nothing is
right), and the server keeps serving. The --check side of these is in tests/integration/test_cli.py."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import change_and_save, diagnostics, open_file, start, stats, uri
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.slow  # the slow tier (large files and bursts of saves): python -m pytest -m slow

GOOD = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


async def still_serving(client: LanguageClient) -> None:
    t0 = time.monotonic()
    s = await stats(client)
    assert s["compiles"] >= 0 and time.monotonic() - t0 < 2.0


def save(client: LanguageClient, path) -> None:
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri(path)))
    )


async def test_not_utf8_file_on_disk(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "latin1.cu"
    path.write_bytes(b"// caf\xe9 au lait\n" + GOOD.encode())
    save(client, path)  # not open: the server reads the file
    (d,) = await diagnostics(client, uri(path))  # checked: the clean kernel adds nothing
    assert d.severity == types.DiagnosticSeverity.Information
    assert "not UTF-8" in d.message and "0xe9" in d.message and "save it as UTF-8" in d.message
    # Read with the bad byte replaced, the file still gets its spec skeleton (the kernel's line is
    # plain ASCII), and the byte on disk is left as it was.
    made = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelLsp.writeSpecSkeleton", arguments=[{"uri": uri(path), "kernel": "k"}]
        )
    )
    made = made if isinstance(made, dict) else made._asdict()
    assert made["created"], made
    assert (tmp_path / "latin1.spec.py").exists() and path.read_bytes().startswith(b"// caf\xe9")
    await still_serving(client)


async def test_binary_file(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "blob.cu"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    save(client, path)
    (d,) = await diagnostics(client, uri(path))
    assert "binary" in d.message
    # An editor that opens it anyway sends text with NULs: same answer, no compile of garbage.
    other = tmp_path / "blob2.cu"
    other.write_bytes(b"")
    u = open_file(client, other, "\x00\x01\x02garbage\x00" * 100)
    (d,) = await diagnostics(client, u)
    assert "binary" in d.message
    await still_serving(client)


async def test_empty_file(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "empty.cu"
    path.write_text("")
    u = open_file(client, path)
    assert await diagnostics(client, u) == []
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u), position=types.Position(line=0, character=0)
        )
    )
    assert hover is None
    await still_serving(client)


async def test_five_megabyte_file(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "huge.cu"
    text = GOOD + "// padding padding padding padding padding padding padding padding\n" * 80_000
    path.write_text(text)
    assert len(text) > 5_000_000
    u = open_file(client, path, text)
    (d,) = await diagnostics(client, u)
    assert "not checked" in d.message and "MiB" in d.message and "maxFileBytes" in d.message
    s = await stats(client)
    # The limit is a setting: raised, the file is compiled.
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"kernelLsp": {"arch": "sm_90", "gpu": {"enabled": False}, "maxFileBytes": 8_000_000}}
        )
    )
    assert await diagnostics(client, u, lambda ds: not ds) == []
    assert (await stats(client))["compiles"] > s["compiles"]


async def test_missing_header(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "needs.cu"
    path.write_text('#include "absent.cuh"\n' + GOOD)
    u = open_file(client, path)
    # NVRTC's first look may come first; nvcc's verdict (its words) replaces it.
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1 and "No such file" in ds[0].message)
    assert d.severity == types.DiagnosticSeverity.Error and d.range.start.line == 0
    assert "absent.cuh: No such file or directory" in d.message
    assert str(tmp_path) in d.message and "includeDirs" in d.message
    # Adding the header and saving fixes it.
    (tmp_path / "absent.cuh").write_text("#pragma once\n")
    change_and_save(client, path, path.read_text() + "// saved\n", version=2)
    assert await diagnostics(client, u, lambda ds: not ds) == []


async def test_unknown_arch_in_settings(client: LanguageClient, tmp_path):
    await start(client, tmp_path, options={"arch": "sm_12", "gpu": {"enabled": False}})
    path = tmp_path / "k.cu"
    path.write_text(GOOD)
    u = open_file(client, path)
    (d,) = await diagnostics(client, u)
    assert d.severity == types.DiagnosticSeverity.Error and d.code == "arch"
    assert "sm_12" in d.message and "sm_90" in d.message  # says which archs would work
    assert any("sm_12" in m.message for m in client.messages)  # and tells the user once
    # Fixing the setting fixes the file, no restart.
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"kernelLsp": {"arch": "sm_90", "gpu": {"enabled": False}}}
        )
    )
    assert await diagnostics(client, u, lambda ds: not ds) == []


async def test_file_deleted_between_event_and_compile(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "doomed.cu"
    path.write_text(GOOD.replace("1.0f", "nope"))
    save(client, path)
    (d,) = await diagnostics(client, uri(path))
    assert '"nope"' in d.message
    # The file goes away, then the save event for it arrives: its findings are cleared.
    path.unlink()
    save(client, path)
    assert await diagnostics(client, uri(path), lambda ds: not ds) == []
    # Gone before the first check ever ran: nothing published but an empty list, no crash.
    ghost = tmp_path / "ghost.cu"
    save(client, ghost)
    await still_serving(client)
    assert list(client.diagnostics.get(uri(ghost), [])) == []


async def test_fifty_saves_in_one_second(client: LanguageClient, tmp_path):
    await start(client, tmp_path)
    path = tmp_path / "busy.cu"
    path.write_text(GOOD)
    u = open_file(client, path)
    assert await diagnostics(client, u, lambda ds: not ds) == []
    before = (await stats(client))["compiles"]
    latencies = []
    t0 = time.monotonic()
    for i in range(50):
        # Every save is different; the last one breaks line 2.
        text = GOOD + f"// save {i}\n" + ("__device__ int broken = nope;\n" if i == 49 else "")
        change_and_save(client, path, text, version=i + 2)
        if i % 10 == 5:
            t = time.monotonic()
            await stats(client)
            latencies.append(time.monotonic() - t)
        await asyncio.sleep(0.018)
    elapsed = time.monotonic() - t0
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert d.range.start.line == 2 and '"nope"' in d.message
    after = (await stats(client))["compiles"]
    assert elapsed < 2.0
    # Responsive: requests are answered while checks run.
    assert max(latencies) < 0.5, latencies
    # Coalesced: far fewer compiles than saves.
    assert 1 <= after - before <= 8, after - before
