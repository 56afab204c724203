"""The profile in the optimizer (issue 15): the baseline's and each round's best's ncu profile
reach the proposer's features (limiter, stalls, hot lines with their source text, what changed),
the report shows the limiter before and after, and a failing profiler changes nothing else.
The GPU gates are the scripted ContentEvaluator; its profiles replay ncu recordings from an H200."""

from __future__ import annotations

import json
from pathlib import Path

from test_optimizer import SIMPLE, Scripted, _evaluator, _p, _target, simple  # noqa: F401
from test_profile import report_of

from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.optimizer.loop import LoopSettings, optimize
from kernel_lsp.optimizer.proposers.tuner import TunerProposer
from kernel_lsp.optimizer.report import markdown, to_json


class Recorder(Scripted):
    def __init__(self, rounds):
        super().__init__(rounds)
        self.features: list[str] = []

    def propose(self, ctx):
        self.features.append(ctx.features.render())
        return super().propose(ctx)


def profiling(evaluator, by_marker: dict[str, ProfileReport], default: ProfileReport):
    calls: list[str] = []

    def profile(source: str) -> ProfileReport:
        marker = next((m for m in by_marker if m in source), "")
        calls.append(marker or "original")
        return by_marker[marker] if marker else default

    evaluator.profile = profile
    return calls


def test_each_rounds_best_is_profiled_and_the_next_prompt_says_what_changed(simple):  # noqa: F811
    stencil = report_of("stencil2d_fp32", "stencil2d/stencil2d_fp32.cu", {"stencil2d": "vadd"})
    vadd = report_of("vector_add_fp32", "vector_add/vector_add_fp32.cu", {"vector_add": "vadd"})
    ev = _evaluator(simple)
    calls = profiling(ev, {"FAST": vadd}, stencil)
    proposer = Recorder([[_p("SLOW"), _p("FAST")], [_p("WRONG")]])
    result = optimize(_target(simple), proposer, ev, LoopSettings(rounds=2, candidates=2))

    first, second = proposer.features
    assert "- limiter of vadd: latency-bound (SM 55%, memory 41% of peak" in first
    assert (
        "stall long scoreboard: 75% of stalled warps (waiting for global/local memory (L1TEX) results)"
        in first
    )
    assert (
        "line 39 (79%, long scoreboard): `dst[at] = 0.5f * src[at] + 0.125f * (up + down + left + right);`"
        in first
    )
    assert "limiter of vadd: memory-bound (L2 at 80% of peak)" in second
    assert "changed since baseline: `vadd` was latency-bound (SM 55%" in second
    assert "now memory-bound (L2 at 80% of peak)" in second
    # The baseline, then the new best of round 1; the final best already has its profile.
    assert calls == ["original", "FAST"]
    assert result.features == first

    rows = {name: (before, after) for name, before, after in to_json(result)["before_after"]}
    assert rows["limiter (ncu)"][0].startswith("latency-bound")
    assert rows["limiter (ncu)"][1] == "memory-bound (L2 at 80% of peak)"
    md = markdown(result)
    assert "## What limits them (Nsight Compute)" in md and "profile vadd: memory-bound" in md
    doc = json.loads(json.dumps(to_json(result), default=str))
    assert doc["baseline"]["profile"]["kernels"][0]["limiter"] == "latency-bound"


def test_a_profiler_that_raises_or_is_absent_changes_nothing_else(simple):  # noqa: F811
    ev = _evaluator(simple)

    def broken(source):
        raise RuntimeError("ncu exploded")

    ev.profile = broken
    result = optimize(_target(simple), Scripted([[_p("FAST")]]), ev, LoopSettings(rounds=1))
    assert result.accepted is not None and result.accepted.note == "FAST"
    assert result.baseline.profile.note == "profiling failed: ncu exploded"
    assert "- ncu profile: none (profiling failed: ncu exploded)" in result.features
    # The scripted evaluator does not profile at all: the features say so.
    plain = optimize(_target(simple), Scripted([[_p("FAST")]]), _evaluator(simple), LoopSettings(rounds=1))
    assert plain.baseline.profile is None and "- ncu profile: none (" in plain.features


def test_the_tuners_report_shows_the_limiter_of_its_best_point(tmp_path: Path):
    sample = Path(__file__).resolve().parents[2] / "samples" / "reduce_sum"
    cu = tmp_path / "reduce_sum_fp32.cu"
    cu.write_text((sample / "reduce_sum_fp32.cu").read_text())
    (tmp_path / "reduce_sum_fp32.spec.py").write_text((sample / "reduce_sum_fp32.spec.py").read_text())
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.optimizer.loop import Target
    from kernel_lsp.optimizer.testing import ContentEvaluator, Rule
    from kernel_lsp.spec import load_specs

    spec = load_specs(str(tmp_path / "reduce_sum_fp32.spec.py")).specs[0]
    source = cu.read_text()
    ev = ContentEvaluator(str(cu), spec, CompileOptions(arch="sm_90"), rules=[Rule("define VEC 4", 60e-6)])
    tuner = TunerProposer(source, spec, spec.kernels, "sm_90", strategy="brute_force")
    recorded = report_of("reduce_sum_fp32", "reduce_sum/reduce_sum_fp32.cu", {})
    calls = profiling(ev, {}, recorded)
    target = Target(str(cu), source, spec, spec.kernels)
    result = optimize(target, tuner, ev, LoopSettings(rounds=1, candidates=2))
    assert result.best is not None and result.best.profile is recorded
    # The tuner does not read profiles: only the baseline and its final best are profiled.
    assert len(calls) == 2
    rows = {name: (before, after) for name, before, after in to_json(result)["before_after"]}
    assert rows["limiter (ncu)"][1].startswith("reduce_sum_partial: memory-bound (L1/shared at 87% of peak)")


def test_a_second_run_takes_the_profiles_from_the_cache(simple, tmp_path):  # noqa: F811
    from kernel_lsp.optimizer.cache import ResultCache

    stencil = report_of("stencil2d_fp32", "stencil2d/stencil2d_fp32.cu", {"stencil2d": "vadd"})
    vadd = report_of("vector_add_fp32", "vector_add/vector_add_fp32.cu", {"vector_add": "vadd"})
    runs = []
    for _ in range(2):
        ev = _evaluator(simple)
        calls = profiling(ev, {"FAST": vadd}, stencil)
        cache = ResultCache(str(tmp_path), "H200-sm_90", "context")
        result = optimize(_target(simple), Scripted([[_p("FAST")]]), ev, LoopSettings(rounds=1), cache=cache)
        runs.append((calls, result))
    (first_calls, first), (second_calls, second) = runs
    assert first_calls == ["original", "FAST"] and second_calls == []  # ncu ran only the first time
    assert second.baseline.profile.to_dict() == first.baseline.profile.to_dict()
    assert second.best.profile.kernels[0].limiter == first.best.profile.kernels[0].limiter


def test_a_failed_profile_is_not_cached(simple, tmp_path):  # noqa: F811
    from kernel_lsp.optimizer.cache import ResultCache

    notes = []
    for broken in (True, False):
        ev = _evaluator(simple)
        if broken:
            ev.profile = lambda source: (_ for _ in ()).throw(RuntimeError("ncu exploded"))
        else:
            profiling(
                ev, {}, report_of("vector_add_fp32", "vector_add/vector_add_fp32.cu", {"vector_add": "vadd"})
            )
        cache = ResultCache(str(tmp_path), "H200-sm_90", "context")
        result = optimize(_target(simple), Scripted([[_p("FAST")]]), ev, LoopSettings(rounds=1), cache=cache)
        notes.append(result.baseline.profile.note)
    assert notes[0] == "profiling failed: ncu exploded" and notes[1] == ""
