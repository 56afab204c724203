"""The proof gate's launch on a GPU, under the real compute-sanitizer, confined as the accused is
(issue 46), in both sandbox modes:

- a candidate past the fence reads a planted secret and tries every way out with it (unix,
  abstract, datagram and TCP sockets, a SysV queue, a file outside, a 12 GiB shared map): nothing
  reaches the test's targets, and the gate still runs every tool;
- the confined gate still finds a planted out-of-bounds write (memcheck) and a planted
  shared-memory race (racecheck)."""

from __future__ import annotations

import dataclasses

import pytest
from escape_targets import Targets, nothing_got_out
from escape_targets import hostile as aimed_at

from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.runner.sanitizer import find_sanitizer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(find_sanitizer() is None, reason="compute-sanitizer is not installed"),
]

SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(entry="saxpy", sizes=[{"n": 4096}],
    args={"x": In("float32"), "y": In("float32"), "out": Out("float32"), "n": Scalar("uint64")},
    reference=lambda x, y: {"out": x + y})
"""
ADD = r"""
__global__ void add(const float* x, const float* y, float* out, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n)
{
    get_out();
    add<<<(unsigned)((n + 255) / 256), 256>>>(x, y, out, n);
}
"""
# Far past the buffer's allocation (its guard bytes lie inside it: memcheck would not see a
# write just past the end).
OUT_OF_BOUNDS = ADD.replace(
    "if (i < n) out[i]", "if (i == 0) out[n + (1ull << 28)] = 1.0f;\n    if (i < n) out[i]"
)
RACE = r"""
__global__ void add(const float* x, const float* y, float* out, size_t n)
{
    __shared__ float tile[256];
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    // no __syncthreads(): the neighbour's slot may not be written yet
    if (i < n) out[i] = tile[(threadIdx.x + 1) % 256] * 0.0f + x[i] + y[i];
}
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n)
{
    add<<<(unsigned)((n + 255) / 256), 256>>>(x, y, out, n);
}
"""


def prove(tmp_path, source: str, tools: tuple[str, ...] | None = None):
    """The gate over `source` as a candidate an LLM wrote, past the fence (built as the user's
    own, then marked as not), in a session whose worker is a judge."""
    path = tmp_path / "probe.cu"
    path.write_text(source)
    spec = tmp_path / "probe.spec.py"
    spec.write_text(SPEC)
    with GpuSession(sandboxed=True) as gpu:
        assert gpu.available, gpu.reason
        print("GATE worker sandbox:", gpu.backend.sandbox)
        build = dataclasses.replace(gpu.build_library(source, str(path)), trusted=False)
        assert build.library is not None, build.result.diagnostics
        extra = {"tools": tools} if tools else {}
        request = GpuCheckRequest(source, str(path), kernel="saxpy", spec=str(spec), artifact=build)
        return gpu.prove(request, **extra)


@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_a_candidate_under_compute_sanitizer_gets_nothing_out(tmp_path, monkeypatch, mechanism):
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
    targets = Targets(tmp_path / "targets")
    try:
        monkeypatch.setenv("HOME", str(targets.home))
        report = prove(tmp_path, aimed_at(targets, ADD))
        print(
            f"GATE {mechanism}: tools {report.tools}, findings {[f.describe() for f in report.findings]}, note {report.note!r}"
        )
        assert sorted(report.tools) == ["initcheck", "memcheck", "racecheck", "synccheck"], report.note
        # Every tool ran the launch to its end: no finding, nothing left unproven.
        assert report.findings == [] and not report.blocks_offer, (report.note, report.findings)
        assert nothing_got_out(targets) == []
    finally:
        targets.close()


@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
@pytest.mark.parametrize(
    ("bug", "tool", "kind"),
    [(OUT_OF_BOUNDS, "memcheck", "invalid global write"), (RACE, "racecheck", "race on shared memory")],
    ids=["out-of-bounds", "race"],
)
def test_the_confined_gate_still_finds_a_planted_bug(tmp_path, monkeypatch, mechanism, bug, tool, kind):
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
    targets = Targets(tmp_path / "targets")  # get_out() of the out-of-bounds variant aims here
    try:
        report = prove(tmp_path, aimed_at(targets, bug) if "get_out" in bug else bug, (tool,))
    finally:
        targets.close()
    print(f"GATE {mechanism} {tool}: {[f.describe() for f in report.findings][:2]} note {report.note!r}")
    assert not report.unconfined and not report.incomplete, report.note
    assert report.blocks_offer and any(f.tool == tool and f.kind == kind for f in report.findings), report
