"""End to end through the real server on host+device files (the nvcc backend): diagnostics at
nvcc's lines with its warning numbers, hover and code lenses with template instance names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import change_and_save, diagnostics, open_file, start
from lsprotocol import types
from pytest_lsp import LanguageClient

from kernel_lsp.compile import find_toolchain

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_projects"
pytestmark = pytest.mark.skipif(
    find_toolchain().problem is not None, reason=f"nvcc backend: {find_toolchain().problem}"
)


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    shutil.copytree(REAL, tmp_path / "real")
    return tmp_path / "real"


async def test_host_device_diagnostics(client: LanguageClient, projects: Path):
    await start(client, projects)
    host_error = open_file(client, projects / "broken" / "host_error.cu")
    warning = open_file(client, projects / "broken" / "warning_20011.cu")
    (d,) = await diagnostics(client, host_error)
    assert (
        d.severity == types.DiagnosticSeverity.Error
        and d.message == 'identifier "missing_count" is undefined'
    )
    # 0-based: nvcc's 15:18 -> (14, 17), the range covers the identifier.
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (14, 17, 30)
    (w,) = await diagnostics(client, warning)
    assert w.severity == types.DiagnosticSeverity.Warning and w.code == "20011-D" and w.range.start.line == 5


async def test_unsaved_edit_of_a_host_device_file(client: LanguageClient, projects: Path):
    await start(client, projects)
    path = projects / "cuda_samples" / "vectorAdd.cu"
    u = open_file(client, path)
    assert await diagnostics(client, u) == []
    broken = path.read_text().replace("int numElements = 50000;", "int numElements = 50000 + nope;")
    client.diagnostics.pop(u)
    change_and_save(client, path, broken, version=2)
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert d.range.start.line == 22 and '"nope"' in d.message  # line 23, 0-based


async def test_hover_and_code_lens_name_each_template_instance(client: LanguageClient, projects: Path):
    await start(client, projects)
    path = projects / "llmc" / "layernorm.cu"
    text = path.read_text()
    u = open_file(client, path, text)
    assert await diagnostics(client, u) == []
    line_no, line = next((i, ln) for i, ln in enumerate(text.splitlines()) if "__global__ void total" in ln)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u),
            position=types.Position(line=line_no, character=line.index("total") + 1),
        )
    )
    value = hover.contents.value
    assert "compiled with nvcc" in value
    assert "| `total<float>` | sm_90 |" in value and "| `total<Pair>` | sm_90 |" in value
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    titles = sorted(lens.command.title for lens in lenses if lens.range.start.line == line_no)
    assert len(titles) == 2
    assert titles[0].startswith("total<Pair>: ") and titles[1].startswith("total<float>: ")
