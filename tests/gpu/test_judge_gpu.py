"""The judge's boundary on a GPU (runner/judge.py): candidates judged in a session whose worker
runs each one in a confined process of its own, as the optimizer runs an LLM's answers.

- the cheating suite (test_cheating.py) gets the same verdicts judged as plain;
- a kernel that writes far past its buffers faults in its own process, and the judge answers on;
- hostile entries, built without the fence (as if past it): one that answers before its work is
  done, one that patches the clock of its process, one that keeps results between calls, one
  that keeps its allocator warm to skip the page map its control pays a call."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cheating import CHEATS, SPEC, STATEFUL

from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.runner.timing import TimingSettings

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
ENTRIES = FIXTURES / "judge"


@pytest.fixture(scope="module")
def judged():
    with GpuSession(launch_timeout_s=3.0, timing=TimingSettings(budget_s=0.2), sandboxed=True) as session:
        assert session.available, session.reason
        print("JUDGE sandbox:", session.backend.sandbox)
        yield session


def check(session: GpuSession, name: str, measure: bool = True):
    path = FIXTURES / f"{name}.cu"
    return session.check(path.read_text(), str(path), SPEC, "vadd", measure=measure)


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
        # kernel: wrong outputs (mismatch), wrong outputs in timing (timing_mismatch), or two
        # runs on the same inputs that disagree (race). Each refuses the candidate.
        assert result.problems[0].kind in ("mismatch", "timing_mismatch", "race"), result.message


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
