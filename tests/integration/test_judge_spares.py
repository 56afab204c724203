"""The judge's accused processes started ahead of need (runner/judge.AccusedPool) and its
batches (every input set in one request: runner/isolation.TimedSets.prepare_side), against
candidates that would profit from either: a process an earlier candidate used, work skipped in
a batch, inputs repeated from one batch to the next."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

# The boundary suite's candidates (an honest launcher, one that keeps results between runs).
from test_judge_boundary import CACHES, HONEST
from test_judge_boundary import check as check_large

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.runner.isolation import MAX_BATCH
from kernel_lsp.runner.judge import AccusedPool
from kernel_lsp.runner.timing import TimingSettings

needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
needs_sandbox = pytest.mark.skipif(
    in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
)
FAST = TimingSettings(warmup_s=0.0, budget_s=0.05, min_samples=30, max_samples=30)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())

SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(
    entry="scale",
    sizes=[{"n": 1000}],
    args={"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
"""

# Right only in a process no earlier candidate used: it leaves a mark in its process's
# environment (which outlives the library) and answers zeros where it finds one.
REMEMBERS = r"""
#include <cstdlib>
__attribute__((constructor)) static void arrive()
{
    if (getenv("KLSP_WAS_HERE")) setenv("KLSP_SECOND", "1", 1);
    setenv("KLSP_WAS_HERE", "1", 1);
}
extern "C" void scale(const float* x, float* y, int n)
{
    bool second = getenv("KLSP_SECOND") != 0;
    for (int i = 0; i < n; ++i) y[i] = second ? 0.0f : 2.0f * x[i];
}
"""

# Does the work only on the first call of a burst: a call within 0.2 ms of the one before it (the
# next set of a batch) returns at once, leaving the poison the judge wrote. The time of the last
# call is kept in its process's environment (statics may not outlive a call).
SKIPS_IN_A_BATCH = r"""
#include <cstdio>
#include <cstdlib>
#include <time.h>
extern "C" void scale(const float* x, float* y, int n)
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double now = t.tv_sec + 1e-9 * t.tv_nsec;
    const char* kept = getenv("KLSP_LAST_CALL");
    bool burst = kept && now - atof(kept) < 0.0002;
    char text[64];
    snprintf(text, sizeof text, "%.9f", now);
    setenv("KLSP_LAST_CALL", text, 1);
    if (burst) return;
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
"""


def check(session: GpuSession, tmp_path: Path, source: str):
    (tmp_path / "scale.cu").write_text(source)
    (tmp_path / "scale.spec.py").write_text(SPEC)
    (result,) = check_file(session, str(tmp_path / "scale.cu"), compile_options=OPTIONS)
    return result


@needs_nvcc
@needs_sandbox
def test_no_candidate_runs_in_a_process_an_earlier_one_used(tmp_path):
    with GpuSession(fake=True, timing=FAST) as plain:
        first, second = check(plain, tmp_path, REMEMBERS), check(plain, tmp_path, REMEMBERS)
        assert first.ok and not second.ok, "in one process the mark should have been found"
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judged:
        for _ in range(3):  # each request's process is a spare no candidate has used
            result = check(judged, tmp_path, REMEMBERS)
            assert result.ok, [p.message for p in result.problems]


@needs_sandbox
def test_the_pool_hands_out_started_processes_and_starts_spares_without_waiting():
    pool = AccusedPool(0, True, "", spares=2)
    try:
        began = time.perf_counter()
        pool.refill()
        assert time.perf_counter() - began < 0.5  # started, not waited for
        a, why = pool.take()
        b, _ = pool.take()
        assert a is not None and b is not None, why
        assert a.available and b.available and a.proc.pid != b.proc.pid
        c, _ = pool.take()  # none left: started there and then
        assert c is not None and c.available and c.proc.pid not in (a.proc.pid, b.proc.pid)
        for accused in (a, b, c):
            accused.retire()
        deadline = time.time() + 20
        while time.time() < deadline and any(x.proc.poll() is None for x in (a, b, c)):
            time.sleep(0.05)
        assert all(x.proc.poll() is not None for x in (a, b, c))
    finally:
        pool.close()


@needs_nvcc
@needs_sandbox
def test_work_skipped_for_some_sets_of_a_batch_is_found(tmp_path):
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judged:
        result = check(judged, tmp_path, SKIPS_IN_A_BATCH)
    assert not result.ok
    words = " ".join(p.message for p in result.problems)
    assert result.problems[0].kind == "timing_mismatch", words
    assert "poison" in words or "wrong" in words, words


@needs_nvcc
@needs_sandbox
def test_a_grown_batch_still_finds_skipped_work_and_results_kept_between_runs(tmp_path, monkeypatch):
    """A short run's batch grows after the warm-up (runner/judge.HostClock.resize_batch): asked
    for requests of a second, a fake run's batch takes the largest size. The new sets are bound
    and checked like the first ones, and the attacks on batches are still found."""
    # The cache on the boundary suite's larger case, where the work it saves shows.
    monkeypatch.setenv("KERNEL_LSP_JUDGE_REQUEST_S", "1.0")
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judged:
        honest = check(judged, tmp_path, HONEST)
        skips = check(judged, tmp_path, SKIPS_IN_A_BATCH)
        caches = check_large(judged, tmp_path, CACHES)
    assert honest.ok, honest.message
    (timing,) = honest.timings
    assert f"of {MAX_BATCH} run(s) each" in timing.clock, timing.clock
    assert timing.measurement.n >= 30
    assert not skips.ok and skips.problems[0].kind == "timing_mismatch", skips.message
    assert not caches.ok and caches.problems[0].kind == "suspicious", caches.message
    assert "already seen" in caches.message


@needs_nvcc
@needs_sandbox
def test_on_the_fake_gpu_a_batch_keeps_three_sets_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNEL_LSP_JUDGE_REQUEST_S", raising=False)
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judged:
        honest = check(judged, tmp_path, HONEST)
    assert honest.ok, honest.message
    assert "of 3 run(s) each" in honest.timings[0].clock, honest.timings[0].clock


# Its timing inputs take 0.1 s a set to make, one after another (small sets are not made side by
# side): the new sets of a grown batch, about 4 s.
SLOW_INPUTS_SPEC = """import time
import numpy as np
from kernel_lsp.spec import Spec, In, Out, Scalar

def slow(rng, shape):
    if shape[0] > 1000:
        time.sleep(0.1)
    return rng.standard_normal(shape).astype(np.float32)

SPEC = Spec(
    entry="scale",
    sizes=[{"n": 1000}],
    timing_sizes=[{"n": 1 << 14}],
    args={"x": In("float32", shape="n", dist=slow), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
"""


@needs_nvcc
@needs_sandbox
def test_growing_a_batch_of_large_sets_is_not_taken_for_a_hang(tmp_path, monkeypatch):
    """The new sets of a grown batch take longer to make than a launch may take (0.5 s here):
    they are made outside the timing's turn, as a host phase, not on the hang detector's clock."""
    monkeypatch.setenv("KERNEL_LSP_JUDGE_REQUEST_S", "1.0")
    (tmp_path / "scale.cu").write_text(HONEST)
    (tmp_path / "scale.spec.py").write_text(SLOW_INPUTS_SPEC)
    with GpuSession(fake=True, timing=FAST, sandboxed=True, launch_timeout_s=0.5) as judged:
        (result,) = check_file(judged, str(tmp_path / "scale.cu"), compile_options=OPTIONS)
    assert result.ok, result.message
    assert f"of {MAX_BATCH} run(s) each" in result.timings[0].clock, result.timings[0].clock


@needs_nvcc
@needs_sandbox
@pytest.mark.parametrize("request_s", ["1.0", "0"])
def test_an_ab_with_grown_batches_still_reaches_min_samples(tmp_path, monkeypatch, request_s):
    """Each sample of a grown batch is one request of up to MAX_BATCH runs, so a budget sized for
    batches of three ended an A/B on an H200 after n=7 (three chunks of rounds: 1, 2, 4). A grown
    clock reaches min_samples before the budget may stop it; a batch that kept its size stops at
    the budget as before (here a budget of zero: the first chunk, one round)."""
    monkeypatch.setenv("KERNEL_LSP_JUDGE_REQUEST_S", request_s)
    (tmp_path / "scale.cu").write_text(HONEST)
    (tmp_path / "scale.spec.py").write_text(SPEC)
    path, spec = str(tmp_path / "scale.cu"), str(tmp_path / "scale.spec.py")
    no_budget = TimingSettings(warmup_s=0.0, budget_s=0.0, batch_s=0.0, min_samples=15, max_samples=40)
    with GpuSession(fake=True, timing=no_budget, sandboxed=True) as judged:
        base = judged.build_library(HONEST, path, OPTIONS)
        candidate = judged.build_library(HONEST, path, OPTIONS, candidate_of=HONEST)
        ab = judged.compare(HONEST, HONEST, path, "scale", base, spec, candidate)
    assert ab.error is None and not ab.problems, ab
    if request_s == "0":
        assert ab.n == 1, ab  # the budget as before: spent after the first round
    else:
        assert ab.n >= 15, ab
