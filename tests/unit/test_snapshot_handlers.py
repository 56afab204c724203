"""The read-only LSP handlers as plain functions of a hand-built DocumentSnapshot: no server, no
compiler, no GPU. The e2e tests drive the same functions through the real server."""

from __future__ import annotations

from lsprotocol import types

from kernel_lsp.check import FileCheck
from kernel_lsp.gpu_reports import HotLine, ProfileReport
from kernel_lsp.gpu_results import KernelCheck
from kernel_lsp.model import CompileResult, Diagnostic, KernelResources, LaunchOccupancy, Occupancy, Severity
from kernel_lsp.server.requests.code_action import code_actions
from kernel_lsp.server.requests.code_lens import code_lenses
from kernel_lsp.server.requests.hover import as_code_names, hover_answer, kernel_parts, needs_check
from kernel_lsp.server.snapshot import DocumentSnapshot, GpuFigures

PATH = "/work/k/scale.cu"
HEADER = "/work/k/ops.cuh"
TEXT = """\
#include "ops.cuh"
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
void run_scale(float* x, int n) {
  scale<<<(n + 255) / 256, 256>>>(x, n);
}
"""
HEADER_TEXT = """\
#pragma once
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
"""


def _kernel(name: str, registers: int, line: int, arch: str = "sm_90", **kw) -> KernelResources:
    occupancy = Occupancy(256, 8, 64, 64, "warps")
    return KernelResources(
        name, f"_Z{name}", arch, registers, 0, 0, 0, 0, line=line, occupancy=occupancy, **kw
    )


def _check(*kernels: KernelResources, compiler: str = "nvrtc", **kw) -> FileCheck:
    result = CompileResult(PATH, "sm_90", True, kernels=list(kernels), compiler=compiler)
    return FileCheck(PATH, results=[result], **kw)


def _at(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def _snapshot(**kw) -> DocumentSnapshot:
    return DocumentSnapshot(uri="file://" + PATH, path=PATH, text=TEXT, **kw)


# --- hover -----------------------------------------------------------------------------------


def test_hover_on_a_kernel_shows_its_resources_and_why_there_are_no_gpu_figures():
    snap = _snapshot(
        check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(absent_reason="no GPU: none found")
    )
    assert needs_check(snap, _at(1, 18))
    parts = kernel_parts(snap, _at(1, 18))  # on `scale`
    assert parts[0].startswith("**`scale`** — compiled with NVRTC")
    assert "| sm_90 | 18 | 0 B | 0 B | 0 B / 0 B | 100% at 256 threads/block" in parts[0]
    assert parts[1] == "_No GPU figures (no GPU: none found); compile features keep working._"


def test_hover_puts_kernel_lsps_figures_above_clangds_signature_and_keeps_clangds_range():
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(absent_reason="no GPU: x"))
    answer = {
        "contents": {"kind": "markdown", "value": "### function `scale`"},
        "range": {"start": {"line": 1, "character": 16}, "end": {"line": 1, "character": 21}},
    }
    hover = hover_answer(snap, _at(1, 18), answer)
    head, rule, rest = hover.contents.value.partition("\n\n---\n\n")
    assert head.startswith("**`scale`** — compiled with NVRTC") and "| sm_90 | 18 |" in head
    assert rule and rest.endswith("### function `scale`")  # clangd's signature last
    assert hover.range == types.Range(start=_at(1, 16), end=_at(1, 21))
    # A word that is no kernel (a host function) gets clangd's hover alone.
    hover = hover_answer(snap, _at(5, 8), {"contents": {"kind": "markdown", "value": "### function `run_scale`"}})
    assert hover.contents.value == "### function `run_scale`"


def test_hover_shows_launch_bounds_as_code_not_as_bold_markdown():
    bounds = LaunchOccupancy("bounds", "__launch_bounds__(256, 4)", 256, Occupancy(256, 8, 64, 64, "warps"))
    kernel = _kernel("scale", 18, 2, launches=(bounds,))
    snap = _snapshot(check=_check(kernel), gpu=GpuFigures(absent_reason="no GPU: x"))
    text = hover_answer(snap, _at(1, 18), None).contents.value
    assert "bounded by `__launch_bounds__(256, 4)`" in text
    # Without a launch, the table's note names it as code too; code spans already there stay.
    bare = KernelResources("scale", "_Zscale", "sm_90", 18, 0, 0, 0, 0, line=2)
    text = hover_answer(_snapshot(check=_check(bare)), _at(1, 18), None)
    assert "or `__launch_bounds__` gives a block size" in text.contents.value
    assert as_code_names("`__launch_bounds__(B)` and __restrict__ x") == "`__launch_bounds__(B)` and `__restrict__` x"
    assert "**" not in as_code_names("__launch_bounds__(B * 2) = 256").replace("`", "")


def test_hover_on_a_word_that_is_no_kernel_says_nothing():
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)))
    for position in (_at(2, 3), _at(3, 14), _at(40, 0)):  # `int`, `x`, past the end
        assert not needs_check(snap, position)
        assert kernel_parts(snap, position) == []
        assert hover_answer(snap, position, None) is None


def test_hover_on_a_template_lists_the_instances_compiled_by_the_files_that_include_it():
    elsewhere = (
        ("/work/k/a.cu", _kernel("axpy<float>", 16, 1, function="axpy", defined_in=HEADER, defined_at=3)),
        ("/work/k/b.cu", _kernel("axpy<double>", 26, 1, function="axpy", defined_in=HEADER, defined_at=3)),
    )
    snap = DocumentSnapshot(
        uri="file://" + HEADER, path=HEADER, text=HEADER_TEXT, instances_elsewhere=elsewhere
    )
    parts = kernel_parts(snap, _at(2, 17))  # on `axpy`
    assert parts[0].startswith("**`axpy`** — compiled with nvcc")
    assert "2 instances: registers 16–26, occupancy 100% (compiled by a.cu, b.cu)" in parts[0]
    assert "| `axpy<double>` | sm_90 | 26 |" in parts[0] and "| `axpy<float>` | sm_90 | 16 |" in parts[0]


def test_hover_on_a_template_nobody_instantiated_says_so():
    snap = DocumentSnapshot(uri="file://" + HEADER, path=HEADER, text=HEADER_TEXT, check=FileCheck(HEADER))
    assert kernel_parts(snap, _at(2, 17))[0].startswith("**`axpy`** — a template: no instance compiled yet")


def test_hover_on_a_kernel_of_a_file_that_does_not_compile_gives_the_error_count():
    error = Diagnostic(PATH, 3, 1, Severity.ERROR, "expected ';'")
    snap = _snapshot(check=FileCheck(PATH, diagnostics=[error]), gpu=GpuFigures(absent_reason="no GPU: x"))
    assert kernel_parts(snap, _at(1, 18))[0] == (
        "**`scale`** — no resources: the file does not compile (1 error(s))."
    )


def test_hover_on_a_host_entry_shows_the_whole_calls_gpu_figures():
    entry = KernelCheck("run_scale", "ok", ok=True, cases=[{"case": "n=1M", "ok": True}], entry=True)
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(checks=(entry,), device="H100"))
    parts = kernel_parts(snap, _at(5, 8))  # on `run_scale`
    assert parts[0] == "**`run_scale`** — host entry, called with the spec's buffers"
    assert parts[1].startswith("**GPU (H100)** — verified on 1 case(s);")


def test_hover_with_a_gpu_and_no_spec_offers_the_skeleton_and_with_a_spec_says_pending():
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(device="H100"))
    assert kernel_parts(snap, _at(1, 18))[-1].startswith("_No spec: add `scale.spec.py`")
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(device="H100"), spec_on_disk=True)
    assert kernel_parts(snap, _at(1, 18))[-1] == "_GPU check pending on H100._"


# --- code lens -------------------------------------------------------------------------------


def _titles(lenses: list[types.CodeLens]) -> list[tuple[int, str]]:
    return [(lens.range.start.line, lens.command.title) for lens in lenses]


def test_code_lenses_put_the_compile_headline_above_each_kernel():
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)))
    assert _titles(code_lenses(snap)) == [(1, "18 regs · 100% occupancy @256 · sm_90")]


def test_code_lenses_prefer_the_gpu_headline_and_add_entries_and_hot_lines():
    failed = KernelCheck("scale", "failed", message="wrong result in case n=4")
    entry = KernelCheck("run_scale", "ok", ok=True, entry=True)
    hot = HotLine("scale", PATH, 4, "x[i] *= 2.0f;", 0.31, 100, "long_scoreboard", 0.8)
    elsewhere_file = HotLine("scale", "/work/k/other.cu", 9, "", 0.5, 10, "", 0.0)
    profiled = KernelCheck("x", "ok", ok=True, profile=ProfileReport(hot_lines=[hot, elsewhere_file]))
    snap = _snapshot(check=_check(_kernel("scale", 18, 2)), gpu=GpuFigures(checks=(failed, entry, profiled)))
    titles = _titles(code_lenses(snap))
    assert titles[0] == (1, "wrong result in case n=4")
    assert titles[1] == (5, "verified")  # above run_scale (line 6, 1-based)
    assert (
        titles[2][0] == 3 and titles[2][1].startswith("31% of stall samples:") and "(scale)" in titles[2][1]
    )
    assert len(titles) == 3  # the other file's hot line is not this file's


def test_code_lenses_of_a_header_show_the_instances_other_files_compiled():
    elsewhere = tuple(
        ("/work/k/a.cu", _kernel(f"axpy<{t}>", 16 + i, 1, function="axpy", defined_in=HEADER, defined_at=3))
        for i, t in enumerate(("float", "double"))
    )
    snap = DocumentSnapshot(
        uri="file://" + HEADER, path=HEADER, text=HEADER_TEXT, instances_elsewhere=elsewhere
    )
    assert _titles(code_lenses(snap)) == [
        (2, "axpy<float>: 16 regs · 100% occupancy @256 · sm_90"),
        (2, "axpy<double>: 17 regs · 100% occupancy @256 · sm_90"),
    ]
    many = tuple(
        ("/work/k/a.cu", _kernel(f"axpy<{n}>", 16 + n, 1, function="axpy", defined_in=HEADER, defined_at=3))
        for n in range(5)
    )
    summary = code_lenses(DocumentSnapshot(uri="", path=HEADER, text=HEADER_TEXT, instances_elsewhere=many))
    assert _titles(summary) == [(2, "5 instances: 16–20 regs · 100% occupancy · sm_90")]


def test_no_lenses_before_the_first_check():
    assert code_lenses(_snapshot()) == []


# --- code actions ----------------------------------------------------------------------------


def test_code_actions_offer_a_skeleton_without_a_spec_and_optimize_with_one():
    titles = [a.title for a in code_actions(_snapshot(), 2, None, True)]
    assert titles == ["Write a spec skeleton for scale"]
    # A spec on disk that cannot be read: neither (the user's file is not overwritten).
    assert code_actions(_snapshot(spec_on_disk=True), 2, None, True) == []
    spec = 'SPEC = Spec(kernel="scale")\n'
    [action] = code_actions(_snapshot(spec_text=spec, spec_on_disk=True), 2, None, True)
    assert action.title == "Optimize scale (FSR)" and action.command.command == "kernelLsp.optimize"
    assert action.command.arguments == [{"uri": "file://" + PATH, "kernel": "scale"}]


def test_optimize_without_a_gpu_is_disabled_with_the_reason_where_the_client_shows_that():
    snap = _snapshot(spec_text='SPEC = Spec(kernel="scale")\n', spec_on_disk=True)
    [disabled] = code_actions(snap, 2, "no GPU: none found. FSR needs one", True)
    assert disabled.disabled.reason == "no GPU: none found. FSR needs one" and disabled.command is None
    [plain] = code_actions(snap, 2, "no GPU: none found. FSR needs one", False)
    assert plain.disabled is None and plain.command.command == "kernelLsp.optimize"


def test_no_code_actions_outside_a_cu_file():
    header = DocumentSnapshot(uri="file://" + HEADER, path=HEADER, text=HEADER_TEXT)
    assert code_actions(header, 2, None, True) == []
