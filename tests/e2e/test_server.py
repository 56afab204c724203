"""End to end through the real server process: push and pull diagnostics, save, hover, live
settings, header findings on both files."""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from conftest import BASE_OPTIONS, change_and_save, diagnostics, open_file, server_env, start, stats, uri
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

ERROR = types.DiagnosticSeverity.Error
WARNING = types.DiagnosticSeverity.Warning


async def test_initialize_declares_features(client: LanguageClient, workspace):
    result = await start(client, workspace)
    caps = result.capabilities
    assert caps.hover_provider
    assert caps.diagnostic_provider is not None and caps.diagnostic_provider.inter_file_dependencies
    assert result.server_info.name == "kernel-lsp"


async def test_push_diagnostics_after_open(client: LanguageClient, workspace):
    await start(client, workspace)
    u = open_file(client, workspace / "broken" / "error.cu")
    (d,) = await diagnostics(client, u)
    assert d.severity == ERROR and d.message == 'identifier "idx" is undefined'
    # 0-based: line 11 col 27 -> (10, 26), the range covers `idx`.
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (10, 26, 29)
    assert d.source.startswith("kernel-lsp")


async def test_warning_has_its_code(client: LanguageClient, workspace):
    await start(client, workspace)
    u = open_file(client, workspace / "broken" / "warning.cu")
    (d,) = await diagnostics(client, u)
    assert d.severity == WARNING and d.code == "177-D" and d.range.start.line == 9


async def test_diagnostics_after_save(client: LanguageClient, workspace):
    await start(client, workspace)
    path = workspace / "broken" / "error.cu"
    u = open_file(client, path)
    await diagnostics(client, u, lambda ds: len(ds) == 1)
    fixed = path.read_text().replace("x[idx]", "x[i]")
    client.diagnostics.pop(u)
    change_and_save(client, path, fixed, version=2)
    assert await diagnostics(client, u, lambda ds: not ds) == []
    # Break it on another line: the finding moves with it.
    broken = fixed.replace("if (i < n) {", "if (i < m) {")
    client.diagnostics.pop(u)
    change_and_save(client, path, broken, version=3)
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1 and ds[0].range.start.line == 9)
    assert d.range.start.line == 9 and "m" in d.message


async def test_header_error_on_header_and_include_line(client: LanguageClient, workspace):
    await start(client, workspace)
    u = open_file(client, workspace / "broken" / "header_error.cu")
    header = uri(workspace / "broken" / "broken_header.cuh")
    (at_include,) = await diagnostics(client, u)
    assert at_include.range.start.line == 3 and at_include.severity == ERROR
    assert at_include.related_information[0].location.uri == header
    (on_header,) = await diagnostics(client, header)
    assert (on_header.range.start.line, on_header.range.start.character) == (5, 11)


async def test_host_code_is_one_diagnostic_with_the_nvrtc_compiler(client: LanguageClient, workspace):
    await start(client, workspace, options={**BASE_OPTIONS, "compiler": "nvrtc"})
    u = open_file(client, workspace / "broken" / "host_code.cu")
    (d,) = await diagnostics(client, u)
    lines = (workspace / "broken" / "host_code.cu").read_text().splitlines()
    first_use = lines.index("#include <vector>")  # the first host code in the file, 0-based
    assert d.code == "host-code" and "__CUDACC_RTC__" in d.message and d.range.start.line == first_use


async def test_hover_on_kernel_shows_registers_and_occupancy(client: LanguageClient, workspace):
    await start(client, workspace)
    path = workspace / "vector_add" / "vector_add_fp32.cu"
    text = path.read_text()
    u = open_file(client, path, text)
    await diagnostics(client, u)
    line_no, line = next((i, ln) for i, ln in enumerate(text.splitlines()) if "__global__" in ln)
    col = line.index("vector_add")
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=u),
            position=types.Position(line=line_no, character=col + 2),
        )
    )
    value = hover.contents.value
    assert "vector_add" in value and "registers" in value and "sm_90" in value
    assert "100% at 256 threads" in value
    # Not on a kernel name: nothing.
    assert (
        await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=u),
                position=types.Position(line=0, character=0),
            )
        )
        is None
    )


DEFINE_SRC = "__global__ void k(float* x) {\n#ifdef BAD\n  x[0] = nope;\n#endif\n}\n"


async def test_configuration_change_applies_without_restart(client: LanguageClient, workspace):
    await start(client, workspace)
    path = workspace / "defines.cu"
    path.write_text(DEFINE_SRC)
    u = open_file(client, path)
    assert await diagnostics(client, u, lambda ds: not ds) == []
    # The client's settings change; it tells the server, which asks workspace/configuration.
    client.set_configuration({**BASE_OPTIONS, "defines": ["BAD"]}, section="kernelLsp")
    client.diagnostics.pop(u)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert d.range.start.line == 2 and '"nope"' in d.message
    # And back.
    client.set_configuration(BASE_OPTIONS, section="kernelLsp")
    client.diagnostics.pop(u)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert await diagnostics(client, u, lambda ds: not ds) == []


async def test_arch_change_through_did_change_configuration_settings(client: LanguageClient, workspace):
    # A client without workspace/configuration sends the settings in the notification itself.
    await start(client, workspace, caps=types.ClientCapabilities())
    path = workspace / "arch.cu"
    path.write_text("__global__ void k(float* x) {\n#if __CUDA_ARCH__ >= 1000\n  x[0] = nope;\n#endif\n}\n")
    u = open_file(client, path)
    assert await diagnostics(client, u, lambda ds: not ds) == []
    client.diagnostics.pop(u)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"kernelLsp": {"arch": "sm_100", "gpu": {"enabled": False}}}
        )
    )
    (d,) = await diagnostics(client, u, lambda ds: len(ds) == 1)
    assert d.range.start.line == 2


async def test_pull_diagnostics_for_a_client_that_declares_them(client: LanguageClient, workspace):
    await start(client, workspace, caps="neovim@v0.11")
    u = open_file(client, workspace / "broken" / "error.cu")
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert report.kind == "full"
    (d,) = report.items
    assert d.severity == ERROR and d.range.start.line == 10
    # Pull clients get no push.
    assert u not in client.diagnostics
    # After a fix and a save, the next pull sees the new state.
    path = workspace / "broken" / "error.cu"
    change_and_save(client, path, path.read_text().replace("x[idx]", "x[i]"), version=2)
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert list(report.items) == []
    assert u not in client.diagnostics


@pytest.mark.parametrize("caps", ["visual_studio_code", "neovim@v0.7.0"])
async def test_push_for_captured_clients_without_pull(client: LanguageClient, workspace, caps):
    await start(client, workspace, caps=caps)
    u = open_file(client, workspace / "broken" / "warning.cu")
    (d,) = await diagnostics(client, u)
    assert d.code == "177-D"


async def test_status_notification_and_stats(client: LanguageClient, workspace):
    await start(client, workspace)
    u = open_file(client, workspace / "broken" / "error.cu")
    # The verdict (nvcc's: NVRTC's first look may come before it).
    await diagnostics(client, u, lambda ds: bool(ds) and ds[0].source == "kernel-lsp (nvcc)")
    s = await stats(client)
    # The workspace watcher may check the other files too; this one was checked at least once.
    assert s["compiles"] >= 1 and s["checkedFiles"] >= 1


SPEC_OK = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b, **_: {"c": a + b},
)
"""


async def test_spec_problems_show_in_the_spec_without_a_gpu(client: LanguageClient, tmp_path):
    from fixture_sources import VADD

    cu, spec = tmp_path / "vadd.cu", tmp_path / "vadd.spec.py"
    cu.write_text(VADD)
    broken = SPEC_OK.replace('sizes=[{"n": 1}, {"n": 1000}]', 'sizes=[{"n": undefined_size}]')
    spec.write_text(broken)
    await start(client, tmp_path)
    open_file(client, cu)
    found = await diagnostics(client, uri(spec), until=lambda ds: len(ds) > 0)
    bad_line = broken.splitlines().index('    sizes=[{"n": undefined_size}],')
    assert found[0].range.start.line == bad_line and "NameError" in found[0].message

    # The fix, saved from the editor (its unsaved text is the truth), clears it.
    u = open_file(client, spec, text=broken)
    client.diagnostics.pop(uri(spec), None)
    change_and_save(client, spec, SPEC_OK, version=2)
    assert await diagnostics(client, u, until=lambda ds: len(ds) == 0) == []


async def test_the_server_dry_runs_a_spec_without_a_gpu(client: LanguageClient, tmp_path):
    """A reference that fails at the smallest size, n=1, is reported at its line, on the CPU; the
    fix, saved from the editor, clears it."""
    from fixture_sources import VADD

    cu, spec = tmp_path / "vadd.cu", tmp_path / "vadd.spec.py"
    cu.write_text(VADD)
    broken = SPEC_OK.replace('{"c": a + b}', '{"c": a + b + 0 * a[1]}')
    spec.write_text(broken)
    await start(client, tmp_path)
    open_file(client, cu)
    u = open_file(client, spec, text=broken)
    found = await diagnostics(client, u, until=lambda ds: len(ds) > 0)
    assert found[0].range.start.line == broken.splitlines().index(
        next(ln for ln in broken.splitlines() if "a[1]" in ln)
    )
    assert "dry run on the CPU: case n=1: the reference raised IndexError" in found[0].message
    client.diagnostics.pop(u, None)
    change_and_save(client, spec, SPEC_OK, version=2)
    assert await diagnostics(client, u, until=lambda ds: len(ds) == 0) == []


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "kernel_lsp"],
        server_env={**server_env(), "KERNEL_LSP_JOB_TIMEOUT_S": "4"},
    )
)
async def impatient_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_spec_that_never_returns_is_stopped_and_the_server_goes_on(impatient_client, tmp_path):
    """A spec stuck in a loop holds a compile worker: past the job timeout that worker is ended,
    the spec gets a diagnostic, and the next file still compiles."""
    from fixture_sources import VADD

    client = impatient_client
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text("while True:\n    pass\n")
    # A finding NVRTC answers for alone (an error goes on to nvcc, which a loaded machine may not
    # finish within this server's 4 s job deadline).
    (tmp_path / "other.cu").write_text("__global__ void k(float* x) { int y = 0; x[0] = 1; }\n")
    await start(client, tmp_path)
    open_file(client, tmp_path / "vadd.cu")
    # (The start-up walk may first publish what a static read of the spec shows.)
    found = await diagnostics(
        client,
        uri(tmp_path / "vadd.spec.py"),
        until=lambda ds: any("did not return within" in d.message for d in ds),
        timeout=60,
    )
    assert "vadd.spec.py did not return within 4 s" in found[0].message
    # (The start-up walk checked other.cu too: wait for a fresh publication.)
    client.diagnostics.pop(uri(tmp_path / "other.cu"), None)
    open_file(client, tmp_path / "other.cu")
    other = await diagnostics(
        client,
        uri(tmp_path / "other.cu"),
        until=lambda ds: any('"y" was declared but never referenced' in d.message for d in ds),
        timeout=60,
    )
    assert any('"y" was declared but never referenced' in d.message for d in other)
