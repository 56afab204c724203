"""A `.cuh` that does not compile on its own is checked as the file that includes it sees it: its
findings are the includer's compile's findings in the header, once; its kernels get resources."""

from __future__ import annotations

import json
from pathlib import Path

from kernel_lsp.check import check_path, includers_for, rank_includers
from kernel_lsp.cli import main
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

SETTINGS = Settings(arch=("sm_90",))

# An "impl" header: it uses the includer's Params and macro, as CUTLASS-style .inl/.cuh files do.
IMPL = """\
extern "C" __global__ void apply(Params p, float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int unused_in_header;
    if (i < n) x[i] = x[i] * p.scale + OFFSET;
}
"""
INCLUDER = """\
struct Params { float scale; };
#define OFFSET 1.0f
#include "impl.cuh"
"""


def project(tmp_path: Path, impl: str = IMPL, includer: str = INCLUDER) -> tuple[str, str]:
    (tmp_path / "impl.cuh").write_text(impl)
    (tmp_path / "kernels.cu").write_text(includer)
    return str(tmp_path / "impl.cuh"), str(tmp_path / "kernels.cu")


def test_a_header_that_needs_its_includer_is_checked_in_its_context(tmp_path):
    header, includer = project(tmp_path)
    alone = check_path(header, SETTINGS)
    assert any("Params" in d.message for d in alone.diagnostics if d.severity == Severity.ERROR)

    check = check_path(header, SETTINGS, includers=((includer, None),))
    assert check.errors == 0
    note, *findings = check.diagnostics
    assert (note.severity, note.code, note.line) == (Severity.INFO, "context", 1)
    assert "checked as included by kernels.cu" in note.message and "Params" in note.message
    # The header's own finding, at the header's line, as the compiler reports it there; once.
    assert [(d.path, d.line, d.severity, d.code) for d in findings] == [
        (header, 4, Severity.WARNING, "177-D")
    ]
    assert [(k.name, k.line) for k in check.kernels] == [("apply", 1)]
    assert all(r.path == header for r in check.results)


def test_a_header_broken_by_itself_gets_no_context_note(tmp_path):
    # The same error with or without its includer: the header's own mistake, reported once,
    # whether or not the includer graph was known when it was checked.
    broken = "#pragma once\n__device__ flaot squared(float v) { return v * v; }\n"
    header, includer = project(tmp_path, broken, '#include "impl.cuh"\n__global__ void k() {}\n')
    alone = check_path(header, SETTINGS)
    in_context = check_path(header, SETTINGS, includers=((includer, None),))
    assert [(d.line, d.col, d.message) for d in in_context.diagnostics] == [
        (d.line, d.col, d.message) for d in alone.diagnostics
    ]
    assert [d.code for d in in_context.diagnostics] != ["context"] and "flaot" in in_context.diagnostics[
        0
    ].message


def test_a_real_error_in_the_header_is_reported_at_the_header(tmp_path):
    header, includer = project(tmp_path, IMPL.replace("p.scale", "p.missing"))
    check = check_path(header, SETTINGS, includers=((includer, None),))
    errors = [d for d in check.diagnostics if d.severity == Severity.ERROR]
    assert [(d.path, d.line) for d in errors] == [(header, 5)] and "missing" in errors[0].message


def test_the_includers_unsaved_text_is_used(tmp_path):
    header, includer = project(tmp_path, includer="// nothing yet\n")
    check = check_path(header, SETTINGS, includers=((includer, INCLUDER),))
    assert check.errors == 0 and check.kernels


def test_an_includer_broken_on_its_own_says_nothing_about_the_header(tmp_path):
    # It stops at its own missing include before reaching the header: the lone check stands.
    header, includer = project(tmp_path, includer='#include "not_there.cuh"\n' + INCLUDER)
    alone = check_path(header, SETTINGS)
    check = check_path(header, SETTINGS, includers=((includer, None),))
    assert check.diagnostics == alone.diagnostics


def test_a_header_that_compiles_alone_is_not_recompiled_through_an_includer(tmp_path):
    header, includer = project(tmp_path, impl="__device__ inline float twice(float x) { return 2 * x; }\n")
    check = check_path(header, SETTINGS, includers=((includer, None),))
    assert check.diagnostics == [] and all(r.path == header for r in check.results)


def test_includers_for_finds_translation_units_through_the_project_include_folders(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "include" / "impl.cuh").write_text(IMPL)
    (tmp_path / "src" / "z.cu").write_text(INCLUDER)
    (tmp_path / "src" / "sub" / "a.cu").write_text(INCLUDER)
    (tmp_path / "src" / "other.cu").write_text("// no include\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "compile_commands.json").write_text(
        json.dumps(
            [
                {"directory": ".", "command": f"nvcc -I../include -c ../src/{f}", "file": f"../src/{f}"}
                for f in ("z.cu", "sub/a.cu", "other.cu")
            ]
        )
    )
    header = str(tmp_path / "include" / "impl.cuh")
    # Checked alone: the database's translation units are the candidates, nearest first (the
    # first is the header's context; the others may launch its kernels).
    assert includers_for([header], SETTINGS) == {
        header: ((str(tmp_path / "src" / "z.cu"), None), (str(tmp_path / "src" / "sub" / "a.cu"), None))
    }
    # Checked with others: those.
    assert includers_for([header, str(tmp_path / "src" / "sub" / "a.cu")], SETTINGS) == {
        header: ((str(tmp_path / "src" / "sub" / "a.cu"), None),)
    }
    ranked = rank_includers(header, {"/p/include/x.cuh", "/p/src/a.cu", "/p/include/b.cu"})
    assert ranked[0].endswith(".cu") and ranked[-1].endswith(".cuh")


def test_cli_reports_the_headers_findings_once(tmp_path, capsys):
    header, includer = project(tmp_path)
    code = main(["check", "--no-gpu", "--arch", "sm_90", "--show-resources", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rel, rel_includer = header, includer  # printed as given: absolute here
    on_header = [ln for ln in out.splitlines() if ln.startswith(f"{rel}:") and "[177-D]" in ln]
    assert on_header == [
        f'{rel}:4:9: warning: variable "unused_in_header" was declared but never referenced [177-D]'
    ]
    # The includer's #include line is listed under it, as for any header (not a second copy).
    assert f"    {rel_includer}:3:1: includes impl.cuh here" in out
    assert "in included header" not in out
    assert "checked as included by kernels.cu" in out and f"{rel}: kernel apply [sm_90]" in out
    assert "0 error(s)" in out


def test_pragma_once_in_main_file_is_not_a_finding_on_a_header(tmp_path, monkeypatch):
    # nvcc's host compiler warns that a header compiled as the main file has `#pragma once`: that
    # says how the header was checked, nothing about its code. On a .cu it stays.
    import kernel_lsp.check as check_module
    from kernel_lsp.model import CompileResult, Diagnostic

    def fake_compile(source, path, options, use_cache=True):
        warning = Diagnostic(
            path, 1, 9, Severity.WARNING, "#pragma once in main file", "host compiler", "nvcc"
        )
        other = Diagnostic(path, 2, 1, Severity.WARNING, "something real", "177-D", "nvcc")
        return CompileResult(path, options.arch, True, [warning, other])

    monkeypatch.setattr(check_module, "compile_source", fake_compile)
    (tmp_path / "h.cuh").write_text("#pragma once\n")
    (tmp_path / "k.cu").write_text("#pragma once\n")
    header = check_path(str(tmp_path / "h.cuh"), SETTINGS)
    assert [d.message for d in header.diagnostics] == ["something real"]
    unit = check_path(str(tmp_path / "k.cu"), SETTINGS)
    assert [d.message for d in unit.diagnostics] == ["#pragma once in main file", "something real"]


def test_watch_mode_checks_a_header_through_its_includer(tmp_path):
    import io

    from kernel_lsp.cli.watch import _WatchSession
    from kernel_lsp.workspace import Workspace

    header, _ = project(tmp_path)
    out = io.StringIO()
    session = _WatchSession([str(tmp_path)], Workspace.fixed(SETTINGS), "text", out)
    try:
        session.first_run()
    finally:
        session.close()
    assert "checked as included by kernels.cu" in out.getvalue()
    assert session.state[header].errors == 0 and session.exit_code() == 0


def test_a_header_nvcc_compiles_alone_carries_no_context_note(tmp_path):
    """A header with a standard include compiles alone under nvcc (its verdict): no note that it
    does not compile on its own (NVRTC's `cannot open source file "cstdint"` said so), and no
    finding; checked through its includer or alone alike."""
    header = tmp_path / "gather.cuh"
    header.write_text(
        "#pragma once\n#include <cstdint>\n"
        "__global__ void gather(const float* x, const int64_t* ids, float* y) { y[threadIdx.x] = x[ids[threadIdx.x]]; }\n"
    )
    (tmp_path / "ops.cu").write_text('#include "gather.cuh"\n')
    check = check_path(str(header), SETTINGS, includers=((str(tmp_path / "ops.cu"), None),))
    assert check.diagnostics == [] and [k.name for k in check.kernels] == ["gather"]
