"""New `__device__` globals in optimizer candidates (issue 31): scratch that every use
re-initialises first is allowed (and listed in the report as scratch), state that survives a
launch or a call is refused as before. The fixtures are shaped like LLM answers: a cooperative
kernel that zeroes its scratch sum before a grid sync, launchers that reset it with
cudaMemcpyToSymbol or cudaMemset of its address; a call counter, a memo, and resets the rule
cannot see covering every use (after the launch, in a branch, part of it, one block's sync only,
under a data-dependent condition, a launcher that reads the last value first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_sources import VADD

from kernel_lsp.compile import CompileOptions
from kernel_lsp.optimizer.loop import LoopSettings, Target, optimize
from kernel_lsp.optimizer.model import Proposal, Status
from kernel_lsp.optimizer.proposers.base import Proposer
from kernel_lsp.optimizer.report import write_report
from kernel_lsp.optimizer.static_checks import NEW_GLOBAL, SCRATCH_GLOBAL, inspect_candidate
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule
from kernel_lsp.spec import load_specs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scratch_globals"
ORIGINAL = (FIXTURES / "original.cu").read_text()
OK = sorted(p.stem for p in FIXTURES.glob("ok_*.cu"))
BAD = sorted(p.stem for p in FIXTURES.glob("bad_*.cu"))


def kinds(name: str, host: bool = True) -> list[tuple[str, str]]:
    found = inspect_candidate((FIXTURES / f"{name}.cu").read_text(), ORIGINAL, host=host)
    return [(f.kind, f.text) for f in found]


def test_there_are_both_kinds():
    assert len(OK) == 3 and len(BAD) == 8


@pytest.mark.parametrize("name", OK)
def test_scratch_reset_before_every_use_is_allowed_and_listed(name):
    found = kinds(name)
    assert [k for k, _ in found] == [SCRATCH_GLOBAL], found
    assert "scratch" in found[0][1]


@pytest.mark.parametrize("name", BAD)
def test_state_that_survives_is_refused_with_the_reason(name):
    found = kinds(name)
    assert found and all(k == NEW_GLOBAL for k, _ in found), found
    assert all("state that outlives a launch:" in text for _, text in found)


@pytest.mark.parametrize(
    "name, why",
    [
        ("bad_call_counter", "`sum_kernel` reads or updates it before writing it"),
        ("bad_memo", "`sum_kernel` reads or updates it before writing it"),
        ("bad_reset_after_launch", "`total` does not reset all of it"),
        ("bad_reset_in_a_branch", "`total` does not reset all of it"),
        ("bad_partial_reset", "`total` does not reset all of it"),
        ("bad_block_sync_only", "without a grid-wide sync between"),
        ("bad_reset_under_data", "which names more than threads and blocks"),
        ("bad_host_reads_first", "`total` reads it on the host before its first launch"),
    ],
)
def test_each_refusal_says_why(name, why):
    assert any(why in text for _, text in kinds(name)), kinds(name)


def test_a_launchers_reset_counts_only_where_the_launcher_runs():
    """A kernel spec's kernels are launched by the runner, not the file's launcher: only a kernel
    that re-initialises the scratch itself is allowed there."""
    assert [k for k, _ in kinds("ok_cooperative_self_init", host=False)] == [SCRATCH_GLOBAL]
    assert [k for k, _ in kinds("ok_launcher_memcpy_to_symbol", host=False)] == [NEW_GLOBAL]
    assert [k for k, _ in kinds("ok_launcher_memset_address", host=False)] == [NEW_GLOBAL]


SCRATCH_VADD = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ float d_scale;
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    cg::grid_group grid = cg::this_grid();
    if (threadIdx.x == 0 && blockIdx.x == 0) d_scale = 1.0f;
    grid.sync();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = (a[i] + b[i]) * d_scale; /* SCRATCH */
}
"""


class _Once(Proposer):
    name = "scripted"

    def __init__(self, proposals):
        self.proposals = proposals

    def propose(self, ctx):
        return self.proposals if ctx.round == 1 else []


def test_the_loop_runs_a_scratch_candidate_and_refuses_a_counter(tmp_path):
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        "SPEC = Spec(kernel='vadd', sizes=[{'n': 1000}], args={'a': In('float32'), 'b': In('float32'),"
        " 'c': Out('float32'), 'n': Scalar('int32')}, reference=lambda a, b: {'c': a + b})\n"
    )
    spec = load_specs(str(tmp_path / "vadd.spec.py")).specs[0]
    target = Target(str(tmp_path / "vadd.cu"), VADD, spec, ["vadd"])
    counter = SCRATCH_VADD.replace(
        "if (threadIdx.x == 0 && blockIdx.x == 0) d_scale = 1.0f;", "atomicAdd(&d_scale, 1.0f);"
    )
    rules = [Rule("SCRATCH", 50e-6)]
    ev = ContentEvaluator(target.path, spec, CompileOptions(arch="sm_90"), rules=rules)
    proposals = [Proposal("llm", SCRATCH_VADD, note="scratch"), Proposal("llm", counter, note="counter")]
    result = optimize(target, _Once(proposals), ev, LoopSettings(rounds=1))
    scratch, counted = result.outcomes
    assert scratch.status is Status.CORRECT, scratch.message
    assert any("new `__device__` scratch `d_scale`" in f for f in scratch.findings)
    assert counted.status is Status.UNSAFE and "new mutable global `d_scale`" in counted.message
    md = Path(write_report(result, str(tmp_path))[1]).read_text()
    assert "r1c1 (correct): line 4: new `__device__` scratch `d_scale`" in md


def test_the_fixtures_compile(capsys):
    from kernel_lsp.cli import main

    assert main(["check", "--no-gpu", str(FIXTURES)]) == 0, capsys.readouterr()
    capsys.readouterr()
