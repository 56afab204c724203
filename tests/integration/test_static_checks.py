"""Static checks on optimizer candidates (issue 12): new mutable globals rejected before running
unless the setting allows them, clock-steered control flow and asm blocks listed in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_sources import VADD

from kernel_lsp.compile import CompileOptions
from kernel_lsp.config import settings_from_dict
from kernel_lsp.optimizer.loop import LoopSettings, Target, optimize
from kernel_lsp.optimizer.model import Proposal, Status
from kernel_lsp.optimizer.proposers.base import Proposer
from kernel_lsp.optimizer.report import write_report
from kernel_lsp.optimizer.static_checks import (
    ASM,
    NEW_GLOBAL,
    TIMER_CONTROL,
    inspect_candidate,
    mutable_globals,
)
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule
from kernel_lsp.spec import load_specs

MEMO = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
#define MEMO_ELEMS (1 << 20)
__device__ float memo_c[MEMO_ELEMS];   // a copy of the last result
__device__ int memo_n, memo_key[2] = {0, 0};
__device__ __managed__ int hits;
__device__ const float kScale = 1.0f;
__device__ float* const kFixed = nullptr;
__device__ const float* last_a;
__constant__ float kTable[4];
__device__ float twice(float x) { return 2 * x; }
__device__ __forceinline__ float add(float a, float b);
/* __device__ float commented_out[4]; */
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

TIMED = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    long long t0 = clock64();
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (now % 2 == 0 && i < n) c[i] = a[i] + b[i];
    long long spent = clock64() - t0;
}
"""


def test_new_mutable_globals_are_found_and_functions_and_constants_are_not():
    found = mutable_globals(MEMO)
    assert set(found) == {"memo_c", "memo_n", "memo_key", "hits", "last_a"}
    assert found["memo_c"] == 3 and found["hits"] == 5
    assert mutable_globals(VADD) == {}


def test_globals_inside_a_namespace_count_and_locals_do_not():
    src = "namespace cheat {\n__device__ int counter;\n}\n__global__ void k(int* p) { __shared__ int s; int x; p[0] = s + x; }\n"
    assert mutable_globals(src) == {"counter": 2}


def test_clock_steered_control_flow_and_asm_are_listed():
    findings = inspect_candidate(TIMED, VADD)
    kinds = [f.kind for f in findings]
    assert kinds.count(TIMER_CONTROL) == 1 and kinds.count(ASM) == 1 and NEW_GLOBAL not in kinds
    timer = next(f for f in findings if f.kind == TIMER_CONTROL)
    assert timer.line == 8 and "now" in timer.text
    # A clock read that only feeds arithmetic steers nothing.
    only_read = VADD.replace("int i =", "long long t = clock64();\n    int i =")
    assert inspect_candidate(only_read, VADD) == []


def test_globals_the_original_already_had_are_not_new():
    assert inspect_candidate(MEMO, MEMO) == []
    assert {f.text.split("`")[1] for f in inspect_candidate(MEMO, VADD)} == {
        "memo_c",
        "memo_n",
        "memo_key",
        "hits",
        "last_a",
    }


class _Once(Proposer):
    name = "scripted"

    def __init__(self, proposals):
        self.proposals = proposals

    def propose(self, ctx):
        return self.proposals if ctx.round == 1 else []


@pytest.fixture
def target(tmp_path: Path) -> Target:
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        "SPEC = Spec(kernel='vadd', sizes=[{'n': 1000}], args={'a': In('float32'), 'b': In('float32'),"
        " 'c': Out('float32'), 'n': Scalar('int32')}, reference=lambda a, b: {'c': a + b})\n"
    )
    spec = load_specs(str(tmp_path / "vadd.spec.py")).specs[0]
    return Target(str(tmp_path / "vadd.cu"), VADD, spec, ["vadd"])


def _evaluator(target: Target) -> ContentEvaluator:
    rules = [Rule("memo_c", 5e-6), Rule("FAST", 50e-6)]
    return ContentEvaluator(target.path, target.spec, CompileOptions(arch="sm_90"), rules=rules)


def test_loop_rejects_a_candidate_with_new_globals_before_running_it(target, tmp_path):
    honest = VADD.replace("if (i < n)", "/* FAST */ if (i < n)")
    ev = _evaluator(target)
    proposer = _Once([Proposal("llm", MEMO, note="memo"), Proposal("llm", honest, note="honest")])
    result = optimize(target, proposer, ev, LoopSettings(rounds=1))
    memo, fair = result.outcomes
    assert memo.status is Status.UNSAFE and "new mutable global `memo_c`" in memo.message
    assert "optimizer.allowNewGlobals" in memo.message
    assert fair.status is Status.CORRECT and result.accepted is fair
    assert ev.checks == 2  # the baseline and the honest one: the memo never ran
    md = Path(write_report(result, str(tmp_path))[1]).read_text()
    assert "## Static checks" in md and "r1c1 (unsafe): line 3: new mutable global `memo_c`" in md


def test_the_setting_lets_new_globals_run(target):
    ev = _evaluator(target)
    result = optimize(
        target, _Once([Proposal("llm", MEMO)]), ev, LoopSettings(rounds=1, allow_new_globals=True)
    )
    assert result.outcomes[0].status is Status.CORRECT and result.outcomes[0].findings
    settings, problems = settings_from_dict({"optimizer": {"allowNewGlobals": True}})
    assert settings.optimizer_allow_new_globals and not problems
    _, bad = settings_from_dict({"optimizer": {"allowNewGlobals": "yes"}})
    assert bad and "expected true or false" in bad[0]


def test_listed_findings_reach_the_json_report(target, tmp_path):
    result = optimize(target, _Once([Proposal("llm", TIMED)]), _evaluator(target), LoopSettings(rounds=1))
    data = json.loads(Path(write_report(result, str(tmp_path))[0]).read_text())
    (cand,) = data["candidates"]
    assert any("control flow depends on the clock" in f for f in cand["findings"])
    assert any("inline asm block" in f for f in cand["findings"])
