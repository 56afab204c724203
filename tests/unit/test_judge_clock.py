"""The judge's clock (runner/judge.HostClock) and its reading of runs on seen inputs, on runs
that only move a virtual clock: what an answer given early, or a result kept between runs, looks
like to it."""

from __future__ import annotations

from kernel_lsp.runner import judge
from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.judge import HostClock, ratio_seen_to_new, seen_inputs_faster


class VirtualTime:
    """The judge's `time`, advanced only by the runs: the test is about what the clock counts,
    not about how well this machine sleeps (a loaded CI machine overslept 4 ms by 4 more)."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def run_that(clock: VirtualTime, answer_after_s: float, copy_takes_s: float):
    """A run whose accused answers after `answer_after_s` and whose settle (the judge's copy)
    then takes `copy_takes_s`: a long copy is the GPU still busy with the candidate's work."""

    def run() -> None:
        clock.now += answer_after_s
        judge.ANSWERED.append(clock.perf_counter())
        clock.now += copy_takes_s

    return run


def test_an_answer_given_before_the_work_is_done_still_pays_for_it(monkeypatch):
    virtual = VirtualTime()
    monkeypatch.setattr(judge, "time", virtual)
    clock = HostClock(FakeDevice())
    # Honest: answers after 4 ms of work, its copy takes 1 ms. Early: answers at once, and the
    # judge's copy waits 4 ms for the work still running, then takes its 1 ms.
    honest, early = run_that(virtual, 0.004, 0.001), run_that(virtual, 0.0, 0.005)
    samples = clock.time_rounds([honest, early], rounds=6, cold_l2=False)
    assert [round(s, 9) for s in samples[0]] == [0.004] * 6  # the copy's own fixed cost is not counted
    assert [round(s, 9) for s in samples[1]] == [0.004] * 6  # the early answer saved nothing
    assert "request to answer" in clock.describe() and "12 requests of 1 run(s)" in clock.describe()


def test_runs_on_seen_inputs_much_faster_than_new_ones_are_suspicious():
    # Sample order as a judged side sees it: new inputs now and then, seen ones in between.
    fresh = [False, True, False, True, False, False, False, True, False, False, False, False]
    honest = [1.0e-3 + 1e-5 * (k % 3) for k in range(len(fresh))]
    cached = [1.0e-3 if f else 0.2e-3 for f in fresh]
    assert seen_inputs_faster(honest, fresh) is None
    why = seen_inputs_faster(cached, fresh)
    assert why and "already seen" in why and "0.20x" in why, why
    # A gap the device's own first use can make (the fake GPU's unflushed host caches) is not read.
    assert seen_inputs_faster(cached, fresh, noise_s=1e-3) is None
    # Judged against a trusted original that shows the same effect, it is no longer suspicious.
    assert seen_inputs_faster(cached, fresh, calibration=ratio_seen_to_new(cached, fresh)) is None


def test_a_drift_over_time_is_not_read_as_a_cache():
    """New inputs come early and late; the machine speeds up as it goes (the first runs slow):
    each run on new inputs is set against the seen runs around it. Against the whole
    measurement, the seen runs (mostly late, so fast) would be 0.44x the new ones."""
    fresh = [True, False, False, True, False, False, False, False, True, False, False, False]
    drifting = [1e-5 * (12 - k) ** 2 for k in range(len(fresh))]  # each run faster than the last
    new = sorted(s for s, f in zip(drifting, fresh, strict=True) if f)
    seen = sorted(s for s, f in zip(drifting, fresh, strict=True) if not f)
    assert seen[len(seen) // 2] / new[len(new) // 2] < judge.CACHE_RATIO  # the naive reading
    assert seen_inputs_faster(drifting, fresh) is None


def test_a_short_batch_grows_after_the_warm_up_as_far_as_memory_allows(monkeypatch):
    virtual = VirtualTime()
    monkeypatch.setattr(judge, "time", virtual)
    asked: list[int] = []

    def resize(batch: int) -> int:  # memory allows eight sets a batch
        asked.append(batch)
        return min(batch, 8)

    clock = HostClock(FakeDevice(), batch=3, resize=resize, request_s=0.004)
    clock.time_rounds([run_that(virtual, 0.0009, 0.0)], rounds=4, cold_l2=False)  # 0.3 ms a run
    # 4 ms / 0.3 ms: 14 asked for, 8 given.
    assert clock.resize_batch() and asked == [14] and clock.batch == 8
    assert clock.answers == [] and clock.copies == []  # the warm-up's figures were of three runs
    clock.time_rounds([run_that(virtual, 0.0024, 0.0)], rounds=2, cold_l2=False)
    assert "of 8 run(s) each" in clock.describe() and not clock.resize_batch()  # long enough now


def test_a_long_batch_or_a_clock_not_asked_to_resize_keeps_its_size(monkeypatch):
    virtual = VirtualTime()
    monkeypatch.setattr(judge, "time", virtual)
    asked: list[int] = []
    long = HostClock(FakeDevice(), batch=3, resize=lambda b: asked.append(b) or b, request_s=0.004)
    long.time_rounds([run_that(virtual, 0.006, 0.0)], rounds=2, cold_l2=False)
    off = HostClock(FakeDevice(), batch=3, resize=lambda b: asked.append(b) or b, request_s=0.0)
    off.time_rounds([run_that(virtual, 0.0003, 0.0)], rounds=2, cold_l2=False)
    assert not long.resize_batch() and not off.resize_batch() and asked == []
    assert long.batch == off.batch == 3


def test_a_grown_batch_reaches_min_samples_before_the_budget_stops_it(monkeypatch):
    """A grown batch's sample is one request of many runs: a budget spent after a few samples (an
    A/B on an H200: n=7) does not stop it before min_samples; a batch that kept its size stops at
    the budget as before (here none: after the first round)."""
    from kernel_lsp.runner.timing import TimingSettings, measure_interleaved

    virtual = VirtualTime()
    monkeypatch.setattr(judge, "time", virtual)
    settings = TimingSettings(warmup_s=0.0, budget_s=0.0, batch_s=0.0, min_samples=15, max_samples=100)
    counts = {}
    for request_s in (0.004, 0.0):
        clock = HostClock(FakeDevice(), batch=3, resize=lambda b: min(b, 8), request_s=request_s)
        runs = [run_that(virtual, 0.0009, 0.0), run_that(virtual, 0.0009, 0.0)]
        clock.time_rounds(runs, rounds=2, cold_l2=False)
        clock.resize_batch()
        a, b = measure_interleaved(clock, runs, settings)
        counts[request_s] = (clock.grown, clock.batch, len(a), len(b))
    assert counts == {0.004: (True, 8, 15, 15), 0.0: (False, 3, 1, 1)}, counts


def _accused(trace: bool, monkeypatch, tmp_path):
    from kernel_lsp.runner.accused import Accused

    monkeypatch.setenv("KERNEL_LSP_JUDGE_TRACE", "1" if trace else "")
    accused = Accused(FakeDevice(), str(tmp_path))
    calls: list[int] = []
    accused.plans[7] = [lambda: calls.append(1)]
    return accused, calls


def test_an_untraced_run_does_nothing_but_the_runs(monkeypatch, tmp_path):
    # Each judged run is inside the judge's clock: the accused's own stamps (about 0.2 us a run
    # here, paid by both sides of an A/B) are taken only when a trace was asked for.
    accused, calls = _accused(False, monkeypatch, tmp_path)
    stamps: list[int] = []
    monkeypatch.setattr("kernel_lsp.runner.accused.time.perf_counter_ns", lambda: stamps.append(1) or 0)
    assert accused.run({"bindings": [7, 7, 7]}) == {"status": "ok"}
    assert len(calls) == 3 and stamps == []


def test_a_traced_run_says_where_each_run_went(monkeypatch, tmp_path):
    accused, calls = _accused(True, monkeypatch, tmp_path)
    reply = accused.run({"bindings": [7, 7]})
    assert reply["status"] == "ok" and len(calls) == 2
    runs = reply["trace"]["runs"]
    assert len(runs) == 2 and all(len(r) == 3 and min(r) >= 0 for r in runs)
    assert len(reply["trace"]["switches"]) == 2
