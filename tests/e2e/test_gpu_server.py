"""The server on a real GPU: a spec'd kernel gets verified and timed after it compiles, the figures
reach hover and the code lens, a wrong kernel gets a mismatch diagnostic at its definition, and
the server keeps answering. Needs an NVIDIA GPU (`-m gpu`)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, change_and_save, diagnostics, open_file, start, uri
from lsprotocol import types

from kernel_lsp.runner.profile import find_ncu

pytestmark = pytest.mark.gpu

GPU_OPTIONS = {"arch": "auto", "gpu": {"enabled": True}}


async def lens_titles(client, u: str) -> list[str]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    return [lens.command.title for lens in lenses or [] if lens.command]


async def wait_for_lens(client, u: str, predicate, timeout: float = 240.0) -> list[str]:
    deadline = time.monotonic() + timeout
    titles: list[str] = []
    while time.monotonic() < deadline:
        titles = await lens_titles(client, u)
        if any(predicate(t) for t in titles):
            return titles
        await asyncio.sleep(0.5)
    raise AssertionError(f"no GPU headline in {timeout}s; lenses: {titles}")


def kernel_position(path: Path, name: str) -> types.Position:
    for i, line in enumerate(path.read_text().splitlines()):
        if "__global__" in line and f" {name}(" in line:
            return types.Position(line=i, character=line.index(f" {name}(") + 2)
    raise AssertionError(f"{name} not found in {path}")


@pytest.mark.long(29)
async def test_gpu_figures_and_mismatch(client, workspace: Path):
    await start(client, workspace, options=GPU_OPTIONS)
    cu = workspace / "vector_add" / "vector_add_fp32.cu"
    u = open_file(client, cu)

    titles = await wait_for_lens(client, u, lambda t: ("ms" in t or "us" in t) and "roofline" in t)
    assert any("H100" in t or "H200" in t or "NVIDIA" in t or "GPU" in t for t in titles), titles

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u), position=kernel_position(cu, "vector_add")
        )
    )
    text = hover.contents.value
    # The resources row (registers from ptxas's report) and the GPU table, both filled in.
    assert re.search(r"\| sm_\d+a? \| \d+ \|", text), text
    assert "| case | median | p10–p90 | n |" in text, text
    assert "cold-L2" in text

    # Achieved occupancy follows from ncu, seconds after the verdict.
    if find_ncu():
        deadline = time.monotonic() + 180
        while "achieved **" not in text and time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            hover = await client.text_document_hover_async(
                types.HoverParams(
                    text_document=types.TextDocumentIdentifier(uri=u),
                    position=kernel_position(cu, "vector_add"),
                )
            )
            text = hover.contents.value
        assert re.search(r"achieved \*\*\d+%\*\* of the SM's warp slots vs theoretical \d+%", text), text

    # A kernel that compiles but computes the wrong thing gets a mismatch at its definition.
    wrong = cu.read_text().replace("x.v[j] + y.v[j]", "x.v[j] - y.v[j]")
    assert wrong != cu.read_text(), "the sample's expression changed: update this test"
    client.diagnostics.pop(u, None)
    change_and_save(client, cu, wrong, version=2)
    found = await diagnostics(
        client,
        u,
        until=lambda ds: any("mismatch" in d.message or "wrong" in d.message for d in ds),
        timeout=240,
    )
    bad = [d for d in found if "mismatch" in d.message or "wrong" in d.message]
    assert bad and bad[0].severity == types.DiagnosticSeverity.Error
    assert bad[0].range.start.line == kernel_position(cu, "vector_add").line

    # Still serving.
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u), position=kernel_position(cu, "vector_add")
        )
    )
    assert hover is not None


@pytest.mark.long(26)
def test_check_cli_verifies_on_gpu(tmp_path: Path):  # no --occupancy: no ncu
    out = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", "-v", str(REPO / "samples" / "vector_add")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "on GPU: verified" in out.stdout, out.stdout
    assert "kernel vector_add [sm_" in out.stdout, out.stdout  # resources from ptxas, not only GPU figures
    assert "kernel(s) verified on a GPU" in out.stdout.splitlines()[-1]  # the summary says so too
    assert uri(tmp_path)  # keep the fixture's import honest
