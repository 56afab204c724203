"""The real server with a project's flags: compile_commands.json (found in build/, including a
malformed one) and a header checked in the context of the file that includes it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from conftest import diagnostics, open_file, start, uri
from lsprotocol import types
from pytest_lsp import LanguageClient

# The unused variable's warning shows that a check ran; no error shows that -I and -D reached it.
KERNEL = (
    '#include "scale.cuh"\nextern "C" __global__ void k(float* x) { int unused; x[0] = SCALE_BY(x[0]); }\n'
)
IMPL = """\
extern "C" __global__ void apply(Params p, float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int unused_in_header;
    if (i < n) x[i] = x[i] * p.scale;
}
"""
INCLUDER = 'struct Params { float scale; };\n#include "impl.cuh"\n'


def project(root: Path) -> Path:
    (root / "include").mkdir()
    (root / "include" / "scale.cuh").write_text("#define SCALE_BY(x) ((x) * FACTOR)\n")
    (root / "src").mkdir()
    kernel = root / "src" / "k.cu"
    kernel.write_text(KERNEL)
    (root / "build").mkdir()
    (root / "build" / "compile_commands.json").write_text(
        json.dumps(
            [
                {
                    "directory": ".",
                    "command": "nvcc -I../include -DFACTOR=2.0f -c ../src/k.cu -o k.o",
                    "file": "../src/k.cu",
                }
            ]
        )
    )
    return kernel


async def test_flags_come_from_compile_commands_json(client: LanguageClient, tmp_path):
    kernel = project(tmp_path)
    await start(client, tmp_path)
    u = open_file(client, kernel)
    found = await diagnostics(client, u, until=lambda d: len(d) > 0)
    assert [(d.code, d.severity) for d in found] == [("177-D", types.DiagnosticSeverity.Warning)], found


async def test_a_malformed_database_is_one_warning_and_the_server_keeps_serving(
    client: LanguageClient, tmp_path
):
    kernel = project(tmp_path)
    db = tmp_path / "build" / "compile_commands.json"
    db.write_text('[{"file": ')
    await start(client, tmp_path)
    u = open_file(client, kernel)
    found = await diagnostics(client, u, until=lambda d: any(x.code == "compile-commands" for x in d))
    [warning] = [d for d in found if d.code == "compile-commands"]
    assert warning.severity == types.DiagnosticSeverity.Warning and str(db) in warning.message
    assert "is not valid JSON" in warning.message
    # Fixed on disk: the next check uses it (the database's stamp is part of the cache key).
    project_db = [
        {"directory": ".", "command": "nvcc -I../include -DFACTOR=2.0f -c ../src/k.cu", "file": "../src/k.cu"}
    ]
    db.write_text(json.dumps(project_db))
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    # The save's first look (the front end, published while nvcc compiles) may come first: the
    # wait is for the full check's findings; a wrong final state times out with what it last read.
    found = await diagnostics(client, u, until=lambda d: [x.code for x in d] == ["177-D"])
    assert not any(x.code == "compile-commands" for x in found), found


async def test_a_database_changed_on_disk_rechecks_the_open_file_without_a_save(
    client: LanguageClient, tmp_path
):
    kernel = project(tmp_path)
    db = tmp_path / "build" / "compile_commands.json"
    good = db.read_text()
    db.write_text(good.replace("-DFACTOR=2.0f ", ""))  # FACTOR undefined: an error at the macro
    await start(client, tmp_path)
    u = open_file(client, kernel)
    found = await diagnostics(client, u, until=lambda d: any("FACTOR" in x.message for x in d))
    assert any(x.severity == types.DiagnosticSeverity.Error for x in found), found
    db.write_text(good)  # as CMake would rewrite it: nothing is saved in the editor
    found = await diagnostics(client, u, until=lambda d: [x.code for x in d] == ["177-D"])
    assert not any("FACTOR" in x.message for x in found), found


async def test_a_header_is_checked_in_the_context_of_its_includer(client: LanguageClient, tmp_path):
    (tmp_path / "impl.cuh").write_text(IMPL)
    (tmp_path / "kernels.cu").write_text(INCLUDER)
    await start(client, tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the start-up walk fills the include graph
        got = await client.protocol.send_request_async("kernelLsp/watchStats", None)
        got = got if isinstance(got, dict) else got._asdict()
        if got["folders"] and got["graphFiles"] >= 2:
            break
        await asyncio.sleep(0.05)
    u = open_file(client, tmp_path / "impl.cuh")

    def settled(d) -> bool:
        return any(x.code == "context" for x in d) and any(x.code == "177-D" for x in d)

    found = await diagnostics(client, u, until=settled)
    assert not [d for d in found if d.severity == types.DiagnosticSeverity.Error], found
    assert [(d.range.start.line, d.code) for d in found if d.code == "177-D"] == [(3, "177-D")]  # once
    [note] = [d for d in found if d.code == "context"]
    assert note.severity == types.DiagnosticSeverity.Information and "kernels.cu" in note.message
    assert uri(tmp_path / "kernels.cu")  # the includer itself keeps its own diagnostics


# A 177-D warning and a `launch-comment` finding (the comment names no kernel of the file): two
# codes, so the editor shows which one a project's selection hides.
TWO_CODES = (
    "// kernel-lsp: launch missing grid=1 block=32\n"
    "__global__ void k(float* x) { int unused; x[threadIdx.x] = 1.0f; }\n"
)


async def test_the_editor_honours_each_files_pyproject_select_and_ignore(client: LanguageClient, tmp_path):
    quiet, loud = tmp_path / "quiet", tmp_path / "loud"
    for folder in (quiet, loud):
        folder.mkdir()
        (folder / "k.cu").write_text(TWO_CODES)
    (quiet / "pyproject.toml").write_text('[tool.kernel-lsp]\nignore = ["177"]\n')
    await start(client, tmp_path)
    u_loud = open_file(client, loud / "k.cu")
    found = await diagnostics(client, u_loud, until=lambda d: len(d) >= 2)
    assert sorted(d.code for d in found) == ["177-D", "launch-comment"], found
    u_quiet = open_file(client, quiet / "k.cu")
    found = await diagnostics(client, u_quiet, until=lambda d: len(d) >= 1)
    await asyncio.sleep(0.5)
    assert [d.code for d in client.diagnostics[u_quiet]] == ["launch-comment"], client.diagnostics[u_quiet]
