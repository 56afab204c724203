"""Through the real server: a header's template shows the resources of the instances that other
files compile, on its definition line (a summary lens past a few instances) and in its hover (the
range of registers, a row per instance); an instance file shows its instance on the line that
leads to the template."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from conftest import diagnostics, open_file, start
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernel_lsp.compile import find_toolchain

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "template_instances"
pytestmark = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")


async def _lenses(client: LanguageClient, u: str) -> list[types.CodeLens]:
    return await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )


async def test_a_header_template_shows_its_instances(client: LanguageClient, tmp_path: Path):
    project = tmp_path / "tpl"
    shutil.copytree(FIXTURE, project)
    await start(client, project)
    header = project / "kernels.cuh"
    u = open_file(client, header)
    assert await diagnostics(client, u) == []
    # The five instance files are checked (at start-up, or because the header was opened).
    deadline, lenses = time.monotonic() + 120, []
    while time.monotonic() < deadline:
        lenses = await _lenses(client, u)
        if lenses and lenses[0].command.title.startswith("5 instances"):
            break
        await asyncio.sleep(0.2)
    (lens,) = lenses
    assert lens.range.start.line == 3  # `__global__ void scale(` is line 4
    assert lens.command.title.startswith("5 instances: ") and "regs" in lens.command.title
    assert lens.command.title.endswith("sm_90")

    line = header.read_text().splitlines()[3]
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u),
            position=types.Position(line=3, character=line.index("scale") + 1),
        )
    )
    value = hover.contents.value
    assert "5 instances: registers " in value and "compiled by " in value
    for name in ("scale<float, 1>", "scale<float, 2>", "scale<int, 1>", "scale<int, 4>", "scale<double, 4>"):
        assert f"| `{name}` | sm_90 |" in value


async def test_an_instance_file_shows_its_instance_where_it_leads_to_the_template(
    client: LanguageClient, tmp_path: Path
):
    project = tmp_path / "tpl"
    shutil.copytree(FIXTURE, project)
    await start(client, project)
    u = open_file(client, project / "launch_double.cu")
    assert await diagnostics(client, u) == []
    (lens,) = await _lenses(client, u)
    assert lens.range.start.line == 1 and lens.command.title.startswith("scale<double, 4>: ")
    assert "regs" in lens.command.title
