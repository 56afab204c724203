"""The judge's boundary on a GPU (runner/judge.py): candidates judged in a session whose worker
runs each one in a confined process of its own, as the optimizer runs an LLM's answers.

- the cheating suite (test_cheating.py) gets the same verdicts judged as plain;
- a kernel that writes far past its buffers faults in its own process, and the judge answers on;
- hostile entries, built without the fence (as if past it): one that answers before its work is
  done, one that patches the clock of its process, one that keeps results between calls, one
  that keeps its allocator warm to skip the page map its control pays a call;
- every check of the trusted path (runner/verify.py's list) holds judged: beside the cheating
  suite (outputs poisoned, guard bytes, inputs unchanged, the same inputs run twice, timed
  outputs checked), a read of shared memory nothing wrote (a kernel, and the published
  reduction as an entry), scratch nothing zeroed, a constant output under a loose tolerance, a
  candidate that disagrees with the original, and a launch counter that gains nothing from
  its global (restored before every launch) are each refused, or no faster, judged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_cheating import CHEATS, SPEC, STATEFUL

from kernel_lsp.gpu import GpuCheckRequest, GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
ENTRIES = FIXTURES / "judge"
PLAIN_ENTRIES = FIXTURES / "entries"


@pytest.fixture(scope="module")
def judged():
    with GpuSession(launch_timeout_s=3.0, timing=TimingSettings(budget_s=0.2), sandboxed=True) as session:
        assert session.available, session.reason
        print("JUDGE sandbox:", session.backend.sandbox)
        yield session


def check(session: GpuSession, name: str, measure: bool = True):
    path = FIXTURES / f"{name}.cu"
    return session.check(
        GpuCheckRequest(path.read_text(), str(path), kernel="vadd", spec=SPEC, measure=measure)
    )


def entry(session: GpuSession, name: str):
    spec = (ENTRIES / "vadd_entry.spec.py").read_text()
    (result,) = check_file(session, str(ENTRIES / f"{name}.cu"), spec_source=spec)
    return result


@pytest.mark.parametrize("name", list(CHEATS))
def test_the_cheating_suite_gets_the_same_verdicts_judged(judged, name):
    kinds, words = CHEATS[name]
    result = check(judged, name)
    assert not result.ok, f"{name} was accepted"
    assert result.problems[0].kind in kinds, result.message
    assert words in result.message, result.message


@pytest.mark.xdist_group("timing")
@pytest.mark.parametrize("name", ["good", *STATEFUL])
def test_honest_and_stateful_kernels_are_right_judged(judged, name):
    result = check(judged, name)
    assert result.ok, f"{name}: {result.message}"
    t = result.timings[-1]
    print(f"JUDGE {name}: {t.measurement.median_s * 1e6:.1f} us, n={t.measurement.n}; {t.clock}")


def test_a_kernel_writing_far_past_its_buffers_faults_alone(judged):
    result = check(judged, "reaches_out", measure=False)
    assert not result.ok and result.problems[0].kind in ("crash", "guard"), result.message
    after = check(judged, "good", measure=False)
    assert after.ok, after.message


@pytest.mark.xdist_group("timing")
def test_an_entry_that_answers_before_its_work_is_done_gains_nothing(judged):
    result = entry(judged, "answers_early")
    if result.ok:  # the judge's copy waited for the GPU: the time holds the kernel's 2 ms
        median = result.timings[-1].measurement.median_s
        print(f"JUDGE answers_early: right, {median * 1e3:.2f} ms")
        assert median >= 1.8e-3, median
    else:
        print(f"JUDGE answers_early: {result.problems[0].kind}: {result.message[:160]}")
        # Which check sees it first depends on when the judge's copy lands against the unfinished
        # kernel: wrong outputs (mismatch), wrong outputs in timing (timing_mismatch), two runs
        # on the same inputs that disagree (race), or a timed run whose `done` came before the
        # GPU could have switched to it (suspicious). Each refuses the candidate.
        assert result.problems[0].kind in ("mismatch", "timing_mismatch", "race", "suspicious"), result.message


@pytest.mark.quiet  # two medians taken one after the other: beside other tests' GPU work, 394 us vs 192 us (H200)
@pytest.mark.xdist_group("timing")
def test_patching_the_clock_of_its_process_changes_no_figure(judged):
    honest = entry(judged, "honest")
    patched = entry(judged, "patches_clock")
    assert honest.ok and patched.ok, (honest.message, patched.message)
    h, p = honest.timings[-1].measurement.median_s, patched.timings[-1].measurement.median_s
    print(f"JUDGE clock patch: {p * 1e6:.1f} us vs honest {h * 1e6:.1f} us")
    assert p >= 0.5 * h


@pytest.mark.xdist_group("timing")
def test_an_entry_that_keeps_results_between_calls_is_suspicious(judged):
    result = entry(judged, "caches")
    assert not result.ok and result.problems[0].kind == "suspicious", result.message
    assert "already seen" in result.message
    print(f"JUDGE caches: {result.message[:200]}")


@pytest.fixture(scope="module")
def judged_long():
    """At least 200 samples a timing: a cache that does the work again on the 4 runs after each
    run on new inputs (8 in 200) still copies its kept answer in most runs, so it would gain."""
    timing = TimingSettings(budget_s=1.0, min_samples=200)
    with GpuSession(launch_timeout_s=3.0, timing=timing, sandboxed=True) as session:
        assert session.available, session.reason
        yield session


@pytest.mark.xdist_group("timing")
@pytest.mark.parametrize(
    ("name", "kinds", "words"),
    [
        ("caches_slows_after_new", ("suspicious",), "already seen"),
        # Its first sight launches no kernel: its bracket is shorter than the GPU's switch
        # (suspicious), or, where it is not, its outputs are the judge's poison.
        ("skips_new_inputs", ("suspicious", "timing_mismatch"), "first timed launch|switches to its process"),
    ],
)
def test_an_entry_that_keeps_results_and_hides_it_is_refused(judged_long, name, kinds, words):
    """A cache that does the work again on the 4 runs after each run on new inputs (which hid it
    from the probe of the tenth session), and one that skips the work on first sight (its last
    run on each set, the one checked then, is right): refused, on a GPU as on the fake one
    (tests/integration/test_judge_boundary.py)."""
    result = entry(judged_long, name)
    figure = result.timings[-1].measurement.median_s * 1e6 if result.timings else None
    print(f"JUDGE {name}: ok={result.ok} figure={figure} us: {result.message[:300]}")
    assert not result.ok and result.problems[0].kind in kinds, result.message
    assert re.search(words, result.message), result.message


@pytest.mark.quiet  # two medians taken one after the other, as the clock patch's
@pytest.mark.xdist_group("timing")
def test_an_entry_that_keeps_its_allocator_warm_gains_nothing(judged):
    """A candidate that leaves one small allocation alive per call keeps the driver's chunk
    mapped, so its per-call scratch is cheap; the control's scratch, in a process with nothing
    small alive, mapped and unmapped a page each call (about 100 us on an H200). The accused
    holds a small allocation of its own (runner/device.CudaDevice), so both pay alike."""
    control = entry(judged, "scratch_each_call")
    warm = entry(judged, "scratch_warms_allocator")
    assert control.ok and warm.ok, (control.message, warm.message)
    c, w = control.timings[-1].measurement.median_s, warm.timings[-1].measurement.median_s
    print(f"JUDGE allocator kept warm: {w * 1e6:.1f} us vs control {c * 1e6:.1f} us")
    assert w >= 0.8 * c, (w, c)


@pytest.mark.xdist_group("timing")
@pytest.mark.parametrize("name", ["gate_done_early", "gate_opens_go"])
def test_an_entry_that_ends_or_opens_its_own_gate_gains_nothing(judged, name):
    """Right, and it rewrites its process's gated run: `done` written before its work, or `go`
    opened before the judge's preparation. Refused (its bracket shorter than the GPU's own
    switch, or the outputs the judge copies are poison or another set's), or no faster than
    the honest entry."""
    honest = entry(judged, "honest")
    result = entry(judged, name)
    assert honest.ok, honest.message
    if result.ok:
        h, c = honest.timings[-1].measurement.median_s, result.timings[-1].measurement.median_s
        print(f"JUDGE {name}: right, {c * 1e6:.1f} us vs honest {h * 1e6:.1f} us")
        # Each figure with the judge's account of its clock: what to read when this fails.
        assert c >= 0.95 * h, (c, h, honest.timings[-1].clock, result.timings[-1].clock)
    else:
        print(f"JUDGE {name}: {result.problems[0].kind}: {result.message[:200]}")
        assert result.problems[0].kind in ("suspicious", "timing_mismatch", "mismatch", "race"), result.message


@pytest.mark.quiet  # a figure against the trusted one: alone on the GPU
@pytest.mark.xdist_group("timing")
def test_the_judged_figure_is_the_trusted_one_and_a_switch_past_it(judged):
    """Issue 44: the judged median of an honest entry (gated, on the judge's events, less the
    switch floor) is never below bench's (the plain worker's events, in-process) and above it by
    at most what a kernel pays for running right after a switch of contexts (2-10 us on an H100:
    benchmarks/results/judged-gpu-clock-h100-2026-12-06.md), where the wall clock it replaced
    added 17-40 us a run."""
    spec = (ENTRIES / "vadd_entry.spec.py").read_text()
    with GpuSession(launch_timeout_s=3.0, timing=TimingSettings(budget_s=0.2)) as plain:
        (trusted,) = check_file(plain, str(ENTRIES / "honest.cu"), spec_source=spec)
    got = entry(judged, "honest")
    assert trusted.ok and got.ok, (trusted.message, got.message)
    t, j = trusted.timings[-1].measurement.median_s, got.timings[-1].measurement.median_s
    print(f"JUDGE figure: judged {j * 1e6:.2f} us, bench {t * 1e6:.2f} us ({got.timings[-1].clock})")
    assert t - max(0.05 * t, 2e-6) <= j <= t + 12e-6, (j, t)


# --- every check of the trusted path, judged ----------------------------------------------------


def test_a_kernel_reading_shared_memory_nothing_wrote_is_refused_judged(judged):
    """The shared memory is poisoned in the accused's own context, by the judge's kernel, before
    each verification launch: poisoned in the judge's context, the candidate's kernels never saw
    it (the published reduction was offered at 9.9x, "correct on every case")."""
    result = check(judged, "smem_uninit", measure=False)
    assert not result.ok and result.problems[0].kind == "mismatch", result.message


def test_the_published_reduction_reading_warp_sums_nothing_wrote_is_refused_judged(judged):
    (result,) = check_file(judged, str(PLAIN_ENTRIES / "planted_reduce.cu"))
    assert not result.ok and result.problems[0].kind == "mismatch", result.message


def test_scratch_nothing_zeroed_is_refused_judged(judged):
    path = FIXTURES / "sum_scratch_unzeroed.cu"
    spec = str(FIXTURES / "sum.spec.py")
    result = judged.check(
        GpuCheckRequest(path.read_text(), str(path), kernel="sum", spec=spec, measure=False)
    )
    assert not result.ok and result.problems[0].kind == "mismatch", result.message


def test_a_constant_output_under_a_loose_tolerance_is_refused_judged(judged):
    path = FIXTURES / "softmax_zeros.cu"
    spec = str(FIXTURES / "softmax_loose.spec.py")
    result = judged.check(GpuCheckRequest(path.read_text(), str(path), kernel="softmax", spec=spec))
    assert not result.ok and result.problems[0].kind == "mismatch", result.message
    assert "the output is constant" in result.message, result.message


def test_a_candidate_that_disagrees_with_the_original_is_refused_judged(judged):
    """No reference in the spec: the original's outputs (run in an accused of its own) are the
    oracle, and half the work disagrees with them."""
    spec = str(FIXTURES / "vadd_differential.spec.py")
    original = (FIXTURES / "good.cu").read_text()
    path = str(FIXTURES / "good.cu")
    same = judged.check(
        GpuCheckRequest(original, path, kernel="vadd", spec=spec, measure=False, reference=original)
    )
    assert same.ok, same.message
    half = (FIXTURES / "half_work.cu").read_text()
    bad = judged.check(
        GpuCheckRequest(half, path, kernel="vadd", spec=spec, measure=False, reference=original)
    )
    assert not bad.ok and bad.problems[0].kind == "baseline_mismatch", bad.message


@pytest.mark.quiet  # two medians taken one after the other, as the clock patch's
@pytest.mark.xdist_group("timing")
def test_a_launch_counter_gains_nothing_from_its_global_judged(judged):
    """Its global is put back before every launch in the accused: every launch does the work,
    so it is right and no faster than the honest kernel."""
    honest = check(judged, "good")
    counter = check(judged, "launch_counter")
    assert honest.ok and counter.ok, (honest.message, counter.message)
    h, c = honest.timings[-1].measurement.median_s, counter.timings[-1].measurement.median_s
    print(f"JUDGE launch counter: {c * 1e6:.1f} us vs honest {h * 1e6:.1f} us")
    assert c >= 0.9 * h, (c, h)
