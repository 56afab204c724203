"""Issue 15 in the real server on a GPU with ncu: after a sample verifies, its profile lands
without the editor waiting on it: code lenses on the hottest lines ("NN% of stall samples: ...")
and the hover's "What limits it" table. Needs an NVIDIA GPU and Nsight Compute (`-m gpu`)."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from conftest import REPO, open_file, start
from lsprotocol import types
from test_gpu_server import GPU_OPTIONS, kernel_position, lens_titles, wait_for_lens

from kernel_lsp.runner.profile import find_ncu

pytestmark = pytest.mark.gpu


# Quiet: the profile is an ncu run, and kernel-lsp's profiles take turns machine-wide
# (runner/profile.PROFILE_LOCK); beside the parallel lane's other profiles this test waited past
# its 240 s for the lens (suite of 2026-11-29, third session), and alone it took 12 s.
@pytest.mark.quiet
@pytest.mark.long(26)
async def test_hot_line_lenses_and_limiter_hover(client, tmp_path: Path):
    if find_ncu() is None:
        pytest.skip("ncu (Nsight Compute) is not installed on this GPU machine")
    shutil.copytree(REPO / "samples" / "stencil2d", tmp_path / "stencil2d")
    await start(client, tmp_path, options=GPU_OPTIONS)
    cu = tmp_path / "stencil2d" / "stencil2d_fp32.cu"
    u = open_file(client, cu)
    # The verdict first (the timing headline), the profile after it.
    await wait_for_lens(client, u, lambda t: "roofline" in t)
    titles = await wait_for_lens(client, u, lambda t: "of stall samples" in t, timeout=240)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    hot = [lens for lens in lenses if "of stall samples" in lens.command.title]
    lines = cu.read_text().splitlines()
    assert hot and all(lines[lens.range.start.line].strip() for lens in hot), titles
    hover = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        hover = await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=u), position=kernel_position(cu, "stencil2d")
            )
        )
        if hover and "What limits it" in hover.contents.value:
            break
        await asyncio.sleep(1.0)
    text = hover.contents.value
    assert "What limits it" in text and "| hottest lines |" in text, text
    assert any(b in text for b in ("memory-bound", "compute-bound", "latency-bound", "launch-bound")), text
    assert await lens_titles(client, u)  # still serving
