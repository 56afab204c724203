"""Real FSR rounds on a GPU with the tuner: every gate real (NVRTC, the GPU verifier against the
spec and the original's outputs, cold-L2 timing, the interleaved A/B). Skipped without a GPU.

The summary lines printed here (`FSR-GPU ...`) are what the issue's closing note quotes."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from fixture_sources import narrow_tune

from kernel_lsp.cli.optimize import optimize_main
from kernel_lsp.config import Settings
from kernel_lsp.optimizer.extract import extract_candidate
from kernel_lsp.optimizer.model import Proposal, Status
from kernel_lsp.optimizer.proposers.base import Proposer
from kernel_lsp.optimizer.session import RunRequest, run

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("timing")]

REPO = Path(__file__).resolve().parents[2]
# Samples whose tunables start at the textbook default, where earlier runs found the largest
# gains (reduce_sum 4.3x, silu_and_mul 1.9x on an H200): the tuner must find them again.
# reduce_sum's tuned point is 1.8x on an H100 with the GPU to itself; silu_and_mul's, found in the
# same budget, only 1.03x (a 95% interval's low end of 1.027 against the 1.02 bar: a coin toss),
# so it stays in benchmarks/optimize.py's table and out of this assertion.
SAMPLES = [("reduce_sum/reduce_sum_fp32.cu", "reduce_sum")]
# The tuner's first round, three candidates: a count, not a time budget (15 s once ended after
# two of them, before the third, BLOCK=256 ITEMS=2, the 1.8x one).
ROUNDS, CANDIDATES = 1, 3


@pytest.fixture(autouse=True)
def no_profiles(monkeypatch):
    """The rounds here are about the search and the gates; what ncu adds (seconds per profile) is
    tested in test_profile_gpu.py."""
    monkeypatch.setenv("KERNEL_LSP_NCU", "/nonexistent/ncu")


@pytest.fixture(scope="module")
def gpu():
    from kernel_lsp.gpu import GpuSession

    session = GpuSession()
    if not session.available:
        pytest.skip(f"no GPU: {session.reason}")
    yield session
    session.close()


@pytest.fixture(scope="module")
def xdg(tmp_path_factory) -> Path:
    """One result cache for the module, out of the user's ~/.cache."""
    return tmp_path_factory.mktemp("xdg")


def _cache(xdg: Path) -> str:
    return str(xdg / "kernel-lsp" / "optimizer")


def _copy(tmp_path: Path, rel: str) -> Path:
    src = REPO / "samples" / rel
    dst_dir = tmp_path / src.parent.name
    shutil.copytree(src.parent, dst_dir, dirs_exist_ok=True)
    return dst_dir / src.name


@pytest.mark.quiet  # reduce_sum's tuned point is a few percent faster: 1.013x [1.009, 1.015] beside 5 other tests
def test_tuner_makes_samples_measurably_faster(gpu, tmp_path, xdg):
    faster = []
    lines = []
    for rel, kernel in SAMPLES:
        path = _copy(tmp_path, rel)
        req = RunRequest(
            path=str(path),
            kernel=kernel,
            settings=Settings(),
            proposer="tune",
            rounds=ROUNDS,
            candidates=CANDIDATES,
            cache_dir=_cache(xdg),
            workspace=str(tmp_path),
        )
        result = run(req, session=gpu)
        assert result.baseline.status is Status.CORRECT, f"{rel}: {result.verdict}"
        assert result.report_paths and all(Path(p).exists() for p in result.report_paths)
        c = result.comparison
        evaluated = sum(1 for o in result.outcomes if o.status is not Status.DUPLICATE)
        lines.append(
            f"FSR-GPU {rel:36s} {result.device} | evals {evaluated:3d} | {result.seconds:6.1f} s | "
            + (f"A/B {c.speedup:.3f}x [{c.ci_low:.3f}, {c.ci_high:.3f}] n={c.samples}" if c else "no A/B")
            + f" | {'OFFERED ' + (result.accepted.note or '') if result.accepted else 'nothing offered'}"
        )
        if result.accepted is not None:
            assert result.comparison.ci_low > 1.02
            assert result.accepted.status is Status.CORRECT
            faster.append(rel)
    print("\n" + "\n".join(lines))
    assert len(faster) == len(SAMPLES), f"only {faster} got measurably faster"


@pytest.mark.long(45)
@pytest.mark.xdist_group("cache")  # no timing claim: a lane of its own
def test_second_run_is_served_from_the_cache(gpu, tmp_path):
    # A space of two points searched to the end (no time budget), so both runs ask the same
    # questions (four points took 75 s beside the other tests on an H100).
    path = _copy(tmp_path, "transpose/transpose_fp32.cu")
    narrow_tune(path, "TILE=32,16 BLOCK_ROWS=8")
    req = RunRequest(
        path=str(path),
        kernel="transpose",
        proposer="tune",
        cache_dir=str(tmp_path / "cache"),
        workspace=str(tmp_path),
    )
    first = run(req, session=gpu)
    t0 = time.perf_counter()
    second = run(req, session=gpu)
    took = time.perf_counter() - t0
    assert all(o.cached or o.status is Status.DUPLICATE for o in second.outcomes)
    assert second.baseline.cached
    assert (second.accepted and second.accepted.source) == (first.accepted and first.accepted.source)
    # How much faster the second run is: benchmarks/optimize.py's table, not an assertion here
    # (the baseline's check and the A/B are timed again, and take what the GPU's load makes them).
    print(f"\nFSR-GPU cache: first run {first.seconds:.1f} s, second run {took:.2f} s")


# The speed-up it applies is 1.8x alone on an H100, 1.009x [1.008, 1.011] beside 7 other tests.
@pytest.mark.quiet
def test_cli_apply_writes_the_faster_file_after_a_backup(gpu, tmp_path, capsys, monkeypatch, xdg):
    path = _copy(tmp_path, "reduce_sum/reduce_sum_fp32.cu")
    # One tuned point beside the written one (the search is the test above's): ITEMS=2.
    narrow_tune(path, "BLOCK=256 ITEMS=1,2 VEC=1")
    before = path.read_text()
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    code = optimize_main(
        [
            str(path),
            "--kernel",
            "reduce_sum",
            "--proposer",
            "tune",
            "--apply",
            "--budget-s",
            "15",
            "--workspace",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    assert path.read_text() != before
    assert "--- a/reduce_sum_fp32.cu" in out and "A/B speedup" in out
    backups = list((tmp_path / ".kernel-lsp" / "backups").iterdir())
    assert len(backups) == 1 and backups[0].read_text() == before


# --- issue 12: an LLM that offers cheats ---------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"
# What the scripted "LLM" answers in round 1: one honest faster kernel, then cheats.
ANSWERS = ["good", "memo_values", "launch_counter", "pointer_cache", "skip_done", "stale_noop"]


class ScriptedAnswers(Proposer):
    """A CPU-side stand-in for the LLM proposer (the GPU machine has no `openai`): the answers
    of a scripted model go through the same extraction as real ones."""

    name = "llm"

    def __init__(self, answers: list[str], original: str):
        self.answers, self.original = answers, original

    def propose(self, ctx):
        if ctx.round > 1:
            return []
        out = []
        for name in self.answers:
            answer = f"Here is a faster kernel:\n```cuda\n{(FIXTURES / f'{name}.cu').read_text()}```\n"
            got = extract_candidate(answer, self.original, ["vadd"])
            out.append(Proposal("llm", got.source, note=name, answer=answer))
        return out


def _fsr(gpu, baseline: str, answers: list[str], **loop):
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.optimizer.evaluator import GpuEvaluator
    from kernel_lsp.optimizer.loop import LoopSettings, Target, optimize
    from kernel_lsp.spec import load_specs

    path = FIXTURES / f"{baseline}.cu"
    specs = load_specs(str(FIXTURES / "vadd.spec.py"))
    spec = specs.specs[0]
    source = path.read_text()
    evaluator = GpuEvaluator(gpu, str(path), spec, CompileOptions(arch=gpu.device.arch), specs=specs)
    target = Target(str(path), source, spec, ["vadd"])
    return optimize(target, ScriptedAnswers(answers, source), evaluator, LoopSettings(rounds=1, **loop))


@pytest.mark.quiet  # beside five other tests on an H200 the honest kernel screened at 0.31x once
def test_scripted_llm_with_cheats_gets_exactly_the_honest_kernel_offered(gpu):
    result = _fsr(gpu, "slow", ANSWERS)
    status = {o.note: o.status for o in result.outcomes}
    print("\nFSR-GPU issue12: " + ", ".join(f"{k}={v.value}" for k, v in status.items()))
    print(f"FSR-GPU issue12 verdict: {result.verdict}")
    assert result.accepted is not None and result.accepted.note == "good", result.verdict
    assert status["memo_values"] is Status.UNSAFE and status["launch_counter"] is Status.UNSAFE
    assert status["pointer_cache"] is Status.UNSAFE
    assert status["skip_done"] is Status.INCORRECT and status["stale_noop"] is Status.INCORRECT
    assert result.comparison.ci_low > 1.02


# Judged (end to end, on the judge's clock): beside five other tests on an H200 it screened at
# 1.13x; alone, 1.01x and 0.94x in the A/B (this session's device runs).
@pytest.mark.quiet
def test_memo_allowed_to_run_is_timed_honestly_and_not_offered(gpu):
    """With the static check off, the runtime protection alone keeps the memoising kernel from
    looking faster than the honest kernel it copies."""
    result = _fsr(gpu, "good", ["memo_values"], allow_new_globals=True)
    (memo,) = result.outcomes
    print(f"\nFSR-GPU issue12 memo vs honest: {memo.status.value}, speedup {memo.speedup}; {result.verdict}")
    assert memo.status is Status.CORRECT and memo.speedup is not None and memo.speedup < 1.05
    assert result.accepted is None
