"""End to end through the real server: hover on a kernel says where its block size came from
(a launch in host code, `__launch_bounds__`) and, for a launch it cannot resolve, why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import diagnostics, open_file, start
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernel_lsp.compile import find_toolchain

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"
pytestmark = pytest.mark.skipif(find_toolchain().problem is not None, reason="host code: needs nvcc")


async def hover_on(client: LanguageClient, uri: str, text: str, marker: str, word: str) -> str:
    line_no, line = next((i, ln) for i, ln in enumerate(text.splitlines()) if marker in ln)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line_no, character=line.index(word) + 1),
        )
    )
    assert hover is not None
    return hover.contents.value


async def test_hover_names_the_launch_the_block_came_from(client: LanguageClient, tmp_path: Path):
    shutil.copy(CORPUS / "matrix_samples.cu", tmp_path / "matrix_samples.cu")
    path = tmp_path / "matrix_samples.cu"
    text = path.read_text()
    await start(client, tmp_path)
    u = open_file(client, path, text)
    assert await diagnostics(client, u) == []
    value = await hover_on(client, u, text, "__global__ void vectorAdd", "vectorAdd")
    assert "| sm_90 |" in value and "at 256 threads/block" in value
    assert "**Launches** (occupancy on sm_90):" in value
    # The table has the figure; the list says where its block came from.
    assert "\n- block 256 from the launch at matrix_samples.cu:63 in `main`" in value
    # At the launch itself, the kernel's name gives the same.
    assert "block 256 from the launch at matrix_samples.cu:63" in await hover_on(
        client, u, text, "vectorAdd<<<", "vectorAdd"
    )
    value = await hover_on(client, u, text, "__global__ void scaleRows", "scaleRows")
    assert "n/a (see the launches below)" in value
    assert (
        "- the launch at matrix_samples.cu:70 in `main`: block size `rowBlock` depends on a runtime value "
        "read from argv (line 66: `int rowThreads = argc > 1 ? atoi(argv[1]) : 32`)"
    ) in value


async def test_hover_for_template_instances_and_launch_bounds(client: LanguageClient, tmp_path: Path):
    shutil.copy(CORPUS / "template_heavy.cu", tmp_path / "template_heavy.cu")
    path = tmp_path / "template_heavy.cu"
    text = path.read_text()
    await start(client, tmp_path)
    u = open_file(client, path, text)
    assert await diagnostics(client, u) == []
    value = await hover_on(client, u, text, "__launch_bounds__(BLOCK) block_reduce", "block_reduce")
    for block, line in ((128, 40), (512, 41), (256, 42)):
        assert (
            f"- `block_reduce<float, {block}>`: block {block} from the launch at template_heavy.cu:{line} "
            "in `reduce` (through macro `LAUNCH_REDUCE`)"
        ) in value
    # fill<float> runs at two block sizes: the second figure is in the list.
    value = await hover_on(client, u, text, "__global__ void fill", "fill")
    assert "- `fill<float>`: block 128 from the launch at template_heavy.cu:47 in `fills`" in value
    assert "at 512 threads/block (64/64 warps" in value.split("- `fill<float>`: block 128")[1]
    value = await hover_on(client, u, text, "bounded_only(float", "bounded_only")
    assert "\n- bounded by `__launch_bounds__(256, 4)`" in value  # code, not bold Markdown
    value = await hover_on(client, u, text, "__global__ void env_sized", "env_sized")
    assert "block size `threads` depends on an environment variable" in value
