"""The judge's clock (runner/judge.GpuClock), the accused's side of a gated run, and the judge's
reading of runs on seen inputs: what an answer given early, or a result kept between runs, looks
like to it."""

from __future__ import annotations

import threading
import time

import pytest

from kernel_lsp.runner import judge
from kernel_lsp.runner.accused import Accused
from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.judge import GATE_DONE, GATE_GO, GpuClock, ratio_figure_to_new, seen_inputs_faster

FLOOR_S = 280e-6  # the switch floor, as an H100 measured it


PREPARATION_S = 40e-6  # the judge's own preparation of a run: inputs, poison, L2 flush


class Bracketed:
    """A gated run as the judge sees it (runner/isolation.GatedRun): its bracket, the copy of
    its outputs after it and the preparation before it, in seconds."""

    def __init__(self, bracket_s: float, copy_s: float, preparation_s: float = PREPARATION_S):
        self.bracket_s, self.copy_s, self.preparation_s = bracket_s, copy_s, preparation_s

    def __call__(self) -> None:
        pass

    def timed(self, side: int, cold_l2: bool) -> judge.GatedTimes:
        return judge.GatedTimes(self.bracket_s, self.copy_s, self.preparation_s)

    def preparation(self, cold_l2: bool) -> float:
        return PREPARATION_S


def test_a_sample_is_the_bracket_less_the_switch_floor_and_an_early_done_pays_for_its_work():
    clock = GpuClock(FakeDevice(), FLOOR_S)
    # Honest: 20 us of work, then a 5 us copy of its outputs. Early: says done after 5 us and
    # works on for 15 us, which the judge's copy then waits for.
    honest = Bracketed(FLOOR_S + 20e-6, 5e-6)
    early = Bracketed(FLOOR_S + 5e-6, 20e-6)
    samples = clock.time_rounds([honest, early], rounds=6, cold_l2=True)
    assert [round(s, 9) for s in samples[0]] == [20e-6] * 6  # the copy's own cost is not counted
    assert [round(s, 9) for s in samples[1]] == [20e-6] * 6  # the early done saved nothing
    assert clock.why_suspicious() is None
    assert "less the switch floor 280.0 us" in clock.describe(), clock.describe()


def test_work_the_gpu_switched_to_before_the_start_mark_is_counted_to_the_run():
    """An accused whose process does not wait for `go` (it opened the gate itself) can only run
    before the judge's start mark by the GPU switching to its context inside the judge's
    preparation: that preparation then takes a switch longer than the judge's own, and all of
    it is counted. The preparation's own jitter, less than half a switch, is not."""
    clock = GpuClock(FakeDevice(), FLOOR_S)
    # Its bracket holds only the rest of its work (5 of 20 us) and the switches; its
    # preparation held the other 15 us and a switch each way.
    early = Bracketed(FLOOR_S + 5e-6, 5e-6, PREPARATION_S + FLOOR_S + 15e-6)
    jitter = Bracketed(FLOOR_S + 20e-6, 5e-6, PREPARATION_S + 3e-6)
    samples = clock.time_rounds([early, jitter], rounds=4, cold_l2=True)
    assert [round(s, 9) for s in samples[0]] == [round(FLOOR_S + 20e-6, 9)] * 4  # slower than honest
    assert [round(s, 9) for s in samples[1]] == [20e-6] * 4
    assert "4 of 8 preparations ran long" in clock.describe(), clock.describe()
    # The fake GPU switches no context (its floor is 0): nothing is read into a preparation.
    fake = GpuClock(FakeDevice(), 0.0)
    long = Bracketed(20e-6, 5e-6, 10 * PREPARATION_S)
    assert fake.time_rounds([long], rounds=2, cold_l2=True) == [[20e-6] * 2]


def test_a_bracket_shorter_than_the_gpus_own_switch_is_suspicious():
    """A run whose `done` the judge found written before it switched to the accused at all (the
    accused wrote it ahead, or the judge's own release did): no figure comes from it."""
    clock = GpuClock(FakeDevice(), FLOOR_S)
    samples = clock.time_rounds([Bracketed(0.3 * FLOOR_S, 5e-6)], rounds=4, cold_l2=True)
    assert samples == [[0.0] * 4]
    why = clock.why_suspicious()
    assert why and "4 of its 4 timed runs ended sooner than the GPU switches" in why, why


class Scripted(Bracketed):
    """Gated runs whose (bracket, preparation) follow a script, one per run, in seconds."""

    def __init__(self, script: list[tuple[float, float]], copy_s: float = 5e-6):
        super().__init__(0.0, copy_s)
        self.script = iter(script)

    def timed(self, side: int, cold_l2: bool) -> judge.GatedTimes:
        bracket, preparation = next(self.script)
        return judge.GatedTimes(bracket, self.copy_s, preparation)


def test_a_run_the_gpu_switched_to_inside_the_preparation_is_counted_from_its_start():
    """The GPU suite's false verdicts on an H100 (six test processes on the GPU): an honest
    entry's one bracket under 0.9 of the floor made its timing `suspicious`. A time slice that
    ends inside the judge's preparation switches to the accused there: its bracket holds no
    switch, its preparation both. Counted from the preparation's start (less the judge's own
    and the floor), the run is its work; it is no sign of a gate not kept."""
    work = [20e-6 + 1e-6 * (k % 5) for k in range(40)]
    script = [(FLOOR_S + w, PREPARATION_S) for w in work]
    # Run 17: the switch to the accused, its work and the switch back inside the preparation.
    script[17] = (8e-6, PREPARATION_S + FLOOR_S + work[17])
    clock = GpuClock(FakeDevice(), FLOOR_S)
    clock.time_rounds([Scripted(script[:8])], rounds=8, cold_l2=True)  # the warm-up
    clock.start_counting()
    (samples,) = clock.time_rounds([Scripted(script[8:])], rounds=32, cold_l2=True)
    assert clock.why_suspicious() is None and clock.short == [0]
    assert samples[17 - 8] == pytest.approx(work[17] + 8e-6), samples[17 - 8]  # its work, not 0
    assert samples[:9] + samples[10:] == pytest.approx(work[8:17] + work[18:])
    assert "1 of 32 preparations ran long" in clock.describe(), clock.describe()


def test_short_brackets_with_no_switch_before_them_gain_nothing_and_many_are_suspicious():
    """Runs whose `done` came with no switch in the bracket nor before it (an entry that writes
    it early): no figure. Each counts as its side's median so far, so ending runs early now and
    then gains nothing; more than an eighth of a side's runs is a verdict."""
    normal = (FLOOR_S + 24e-6, PREPARATION_S)
    early = (0.3 * FLOOR_S, PREPARATION_S)
    script = [normal] * 8 + [early if k % 9 == 4 else normal for k in range(32)]
    clock = GpuClock(FakeDevice(), FLOOR_S)
    clock.time_rounds([Scripted(script[:8])], rounds=8, cold_l2=True)
    clock.start_counting()
    (samples,) = clock.time_rounds([Scripted(script[8:])], rounds=32, cold_l2=True)
    assert clock.short == [4] and clock.why_suspicious() is None
    assert min(samples) == pytest.approx(24e-6), min(samples)

    many = [early if k % 4 == 0 else normal for k in range(32)]
    clock = GpuClock(FakeDevice(), FLOOR_S)
    clock.start_counting()
    clock.time_rounds([Scripted([normal] * 32), Scripted(many)], rounds=32, cold_l2=True)
    why = clock.why_suspicious()
    assert why and "8 of its 32 timed runs ended sooner" in why, why


def test_a_null_run_inside_the_judges_lead_does_not_lower_the_switch_floor():
    """An H100 ran the floor process's null kernel inside the judge's 20 us lead now and then:
    a bracket of 2.5 us, which as the least bracket made the floor 0 and every judged figure
    280 us too long (an honest 31 us entry judged 291.7 us). Its window, preparation included,
    is a switch pair like the others."""
    own = 25e-6
    times = [judge.GatedTimes(FLOOR_S + 1e-6 * (k % 3), 5e-6, own + 1e-6 * (k % 2)) for k in range(15)]
    times.append(judge.GatedTimes(2.5e-6, 5e-6, own + FLOOR_S - 1e-6))
    windows = judge.null_windows(times, own)
    assert min(windows) == pytest.approx(FLOOR_S, abs=1.5e-6), min(windows)
    assert min(t.bracket for t in times) == 2.5e-6  # what the floor was


def gated_accused(tmp_path):
    """An accused on the fake GPU with one plan (which records when it ran) and a gate buffer."""
    device = FakeDevice()
    accused = Accused(device, str(tmp_path))
    flags = device.alloc_shared(judge.GATE_BYTES)
    accused.buffers[1] = flags
    ran: list[float] = []
    accused.plans[7] = [lambda: ran.append(time.perf_counter())]
    said: list[dict] = []
    accused.say = said.append
    gate = {"flags": 1, "seq": 5, "go": GATE_GO, "done": GATE_DONE}
    return device, accused, flags, ran, said, gate


def test_a_gated_run_waits_for_go_and_writes_done_after_its_work(tmp_path):
    device, accused, flags, ran, said, gate = gated_accused(tmp_path)
    replies: list[dict] = []
    worker = threading.Thread(target=lambda: replies.append(accused.run({"bindings": [7], "gate": gate})))
    worker.start()
    deadline = time.monotonic() + 10
    while not said and time.monotonic() < deadline:
        time.sleep(0.001)
    assert said == [{"status": "queued"}]
    time.sleep(0.05)
    assert ran == [] and int(device.download(flags + GATE_DONE, 4).view("uint32")[0]) == 0  # not before go
    opened = time.perf_counter()
    device.gate_write(flags + GATE_GO, 5)
    worker.join(10)
    assert replies == [{"status": "ok"}] and len(ran) == 1 and ran[0] >= opened
    assert int(device.download(flags + GATE_DONE, 4).view("uint32")[0]) == 5


def test_a_gated_run_of_an_unknown_binding_fails_before_saying_queued(tmp_path):
    _device, accused, _flags, ran, said, gate = gated_accused(tmp_path)
    with pytest.raises(KeyError):
        accused.run({"bindings": [8], "gate": gate})
    assert said == [] and ran == []


def test_the_fake_gpus_gate_times_out_rather_than_waiting_forever():
    device = FakeDevice()
    flags = device.alloc_shared(judge.GATE_BYTES)
    began = time.monotonic()
    with pytest.raises(Exception, match="never opened"):
        device.gate_wait(flags, 3, timeout_s=0.05)
    assert time.monotonic() - began < 5
    device.gate_write(flags, 0xFFFFFFFF)  # cyclic: a flag written past the wrap still opens
    device.gate_write(flags, 2)
    device.gate_wait(flags, 1, timeout_s=0.05)


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
    assert seen_inputs_faster(cached, fresh, calibration=ratio_figure_to_new(cached, fresh)) is None


def test_a_busy_host_slowing_some_runs_on_new_inputs_is_not_a_cache():
    """CI's failure on 2 busy cores: a short timing had 3 runs on new inputs and two of them were
    preempted (7.1 ms against 3.1 ms). A kept result slows every run on new inputs, not some."""
    fresh = [False, True, False, True, False, False, False, True, False, False, False, False, False]
    preempted = [7.1e-3 if k in (1, 3) else 3.1e-3 for k in range(len(fresh))]
    assert ratio_figure_to_new(preempted, fresh) < judge.CACHE_RATIO  # the median's reading
    assert seen_inputs_faster(preempted, fresh) is None
    every = [7.1e-3 if f else 3.1e-3 for f in fresh]
    assert seen_inputs_faster(every, fresh) is not None
    # With more runs on new inputs, a quarter may be slowed by the host, not more.
    fresh = [k % 3 == 1 for k in range(24)]  # 8 runs on new inputs
    for slowed, suspicious in ((2, False), (6, True)):
        ks = [k for k, f in enumerate(fresh) if f][:slowed]
        samples = [7.1e-3 if k in ks else 3.1e-3 for k in range(len(fresh))]
        assert (seen_inputs_faster(samples, fresh) is not None) is suspicious, slowed


def test_a_drift_over_time_is_not_read_as_a_cache():
    """New inputs come early and late; the machine speeds up as it goes (the first runs slow):
    the seen runs (mostly late, so fast) are 0.44x the new ones at their medians, but the last
    run on new inputs is faster than the figure, and the reading at the three-quarter point
    takes it. (In an A/B the trusted side's own reading calibrates a drift away.)"""
    fresh = [True, False, False, True, False, False, False, False, True, False, False, False]
    drifting = [1e-5 * (12 - k) ** 2 for k in range(len(fresh))]  # each run faster than the last
    new = sorted(s for s, f in zip(drifting, fresh, strict=True) if f)
    seen = sorted(s for s, f in zip(drifting, fresh, strict=True) if not f)
    assert seen[len(seen) // 2] / new[len(new) // 2] < judge.CACHE_RATIO  # the naive reading
    assert seen_inputs_faster(drifting, fresh) is None


def test_a_cache_that_slows_the_runs_after_each_new_input_is_still_read_as_one():
    """The tenth session's hole: a candidate that copies kept answers and does the work again on
    the 4 runs after each run on new inputs (it knows one when it sees one). Set against the seen
    runs around each new one, it read 1.0; its figure is still the copy's, 5x the work's."""
    fresh = [k in (1, 3, 7, 15, 31) for k in range(60)]
    slowed = {k + d for k in (1, 3, 7, 15, 31) for d in range(1, 5)}
    samples = [1.0e-3 if fresh[k] or k in slowed else 0.2e-3 for k in range(60)]
    assert sorted(samples)[30] == 0.2e-3  # the figure it would get
    why = seen_inputs_faster(samples, fresh)
    assert why and "already seen" in why and "0.20x" in why, why
    # Judged against a trusted original that slows alike on new inputs it is not (calibration).
    honest_new_cost = [1.0e-3 if fresh[k] else 0.45e-3 for k in range(60)]
    calibration = ratio_figure_to_new(honest_new_cost, fresh)
    assert seen_inputs_faster(honest_new_cost, fresh) is not None
    assert seen_inputs_faster(honest_new_cost, fresh, calibration) is None
