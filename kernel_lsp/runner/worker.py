"""The GPU worker: a separate process per GPU that loads CUBINs, runs the verification cases and
times launches. Started by kernel_lsp.gpu.GpuSession as

    python -m kernel_lsp.runner.worker [--device N] [--fake] [--judge]

and driven through kernel_lsp.runner.protocol frames on stdin/stdout (the request and reply
fields are listed in `handle`). A hang is the client's business (it kills this process); a sticky
CUDA error makes this process report (`"fatal": true`) and exit, because its context is gone.
`--fake` uses runner/fake.py instead of a GPU, for CI. `--judge`: the
worker of a sandboxed session, which loads no code it judges: each request's candidate (and the
original beside it) runs in an accused process of its own (runner/judge.py, runner/accused.py).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from kernel_lsp import procs, tempdirs
from kernel_lsp.model import TimingSettings
from kernel_lsp.runner import case_memo, turns
from kernel_lsp.runner.device import CudaDevice, DeviceFault, NoDevice
from kernel_lsp.runner.entry import EntryLibrary, EntryStep, check_leaks, memory_in_use
from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.hardware import measure_device
from kernel_lsp.runner.isolation import (
    JUDGED_SETS,
    MAX_SETS,
    TimedSets,
    restorer,
    set_count,
)
from kernel_lsp.runner.judge import (
    AccusedGone,
    AccusedPool,
    AccusedProcess,
    GateFault,
    GpuClock,
    RemotePipeline,
    SwitchFloor,
    ratio_figure_to_new,
    seen_inputs_faster,
    start_accused,
)
from kernel_lsp.runner.loading import build_steps
from kernel_lsp.runner.protocol import read_message, write_message
from kernel_lsp.runner.roofline import figures
from kernel_lsp.runner.timing import measure, measure_interleaved
from kernel_lsp.runner.verify import (
    WAITING_FOR_THE_GPU,
    CaseRunner,
    Failed,
    Problem,
    Step,
    baseline_oracle,
    gpu_lanes,
)
from kernel_lsp.spec import (
    Spec,
    SpecError,
    case_label,
    load_specs,
)
from kernel_lsp.spec.inputs import TIMING_SEED
from kernel_lsp.stats import summarize

if TYPE_CHECKING:
    from .device_protocol import Clock, Device

# The progress phases as the `-v` line names them (several phases of one kind counted together).
PHASE_LABELS = {
    "inputs and reference": "inputs+reference",
    "original entry": "verify",
    "race check": "verify",
    "original kernel": "verify",
    "timing inputs": "timing inputs",
    "timing inputs bound": "timing inputs bound",  # handed to a judged candidate's process
    "timing": "timed runs",
    "checking timed outputs": "timed outputs checked",
}
# Seconds of the phases above spent waiting for a turn on the GPU (runner/turns.py): a part of
# them, not one more phase.
WAITED = "of which waiting for the GPU"
HOST_PHASE_TIMEOUT_S = 600.0  # numpy references on large sizes can take a while
FATAL_EXIT = 3

Send = Callable[[dict[str, Any]], None]


def load_spec(desc: dict[str, Any]) -> Spec:
    loaded = load_specs(desc["path"], desc.get("source"))
    errors = [d for d in loaded.diagnostics if d.severity.label == "error"]
    if errors:
        d = errors[0]
        raise Failed(Problem("spec_error", "", f"{os.path.basename(d.path)}:{d.line}: {d.message}"))
    want = desc.get("kernel")
    for spec in loaded.specs:
        if want in (None, spec.kernel, spec.name):
            if case_memo.ACTIVE is not None:
                case_memo.ACTIVE.begin_request(spec, desc)
            return spec
    raise Failed(Problem("spec_error", "", f"no spec for kernel `{want}` in {desc['path']}"))


def _first_use_noise(device: Device) -> float:
    """What a device's own first use of new inputs can cost an honest run (runner/fake.py)."""
    return float(getattr(device, "first_use_noise_s", 0.0))


def _gates_failed() -> Failed:
    return Failed(Problem("sandbox", "", "the judge's gates did not work in a process of its own"))


def _judged(steps: list[Any] | None) -> bool:
    return any(isinstance(s, RemotePipeline) for s in steps or [])


def _on_legacy_stream(*step_lists: list[Any] | None) -> bool:
    """An entry without a stream parameter launches on the legacy default stream: time there."""
    return any(isinstance(s, EntryStep) and not s.takes_stream for steps in step_lists for s in steps or [])


class Worker:
    def __init__(
        self,
        device: Device,
        send: Send,
        judging: AccusedPool | None = None,
    ):
        self.device = device
        self.send = send
        # A judge runs no candidate code itself: candidates run in accused processes.
        self.judging = judging
        self.accused: list[AccusedProcess] = []
        self.pipelines: list[RemotePipeline] = []  # this request's: their gates freed after it
        self.floor: SwitchFloor | None = None  # the process the switch floor is measured in
        # The user's entry libraries are written here.
        self.folder = tempdirs.make("kernel-lsp-gpu-worker-")
        atexit.register(shutil.rmtree, self.folder, True)
        self.phase = ""
        self.case = ""
        self._dev_info: dict[str, Any] | None = None
        # Where a request's seconds went: each phase's wall time (from its progress event to the
        # next), for the `-v` line of `check` (`dot ok (4.2 s: inputs+reference 2.0, ...)`).
        self.phase_s: dict[str, float] = {}
        self._waited_before = 0.0
        self._phase_start = time.perf_counter()

    def _account(self, next_phase: str) -> None:
        now = time.perf_counter()
        if self.phase:
            label = PHASE_LABELS.get(self.phase, self.phase)
            self.phase_s[label] = self.phase_s.get(label, 0.0) + now - self._phase_start
        self.phase, self._phase_start = next_phase, now

    def progress(self, phase: str, case: str, timeout_s: float | None) -> None:
        self._account(phase)
        self.case = case
        self.send(
            {
                "event": "progress",
                "phase": phase,
                "case": case,
                "timeout_s": HOST_PHASE_TIMEOUT_S if timeout_s is None else timeout_s,
            }
        )

    def device_name(self) -> str:
        if self._dev_info is None:
            self._dev_info = self.device.info()
        return str(self._dev_info["name"])

    # --- requests -------------------------------------------------------------------------------

    def check(self, msg: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Request: spec {path, source?, kernel}, steps [{kernel, symbol, params, grid, block,
        smem}], baseline_steps (optional, CUBIN in blobs[1]), measure, timing {TimingSettings},
        launch_timeout_s, device {DeviceInfo fields, for the roofline}, runs.
        Reply: status ok|failed, problems [...], cases [{case, ok}], timings [{case, measurement,
        bytes, flops, bandwidth_Bps, flops_per_s, roofline, bound, suspicious}]."""
        self.phase_s, self.phase = {}, ""
        self._waited_before = turns.ACTIVE.waited_s if turns.ACTIVE is not None else 0.0
        self.progress("spec", "", None)
        spec = load_spec(msg["spec"])
        timeout = float(msg.get("launch_timeout_s", 5.0))
        modules: list[Any] = []
        states: list[Any] = []
        self.progress("load", "", timeout)
        try:
            steps = self._candidate(blobs[0], msg["steps"], modules, states, timeout)
            # The original, in a judge, runs in an accused process of its own as well: no code but
            # kernel-lsp's is loaded in the judge.
            baseline = (
                self._candidate(blobs[1], msg["baseline_steps"], modules, states, timeout)
                if msg.get("baseline_steps")
                else None
            )
            with self.device.legacy_stream(_on_legacy_stream(steps, baseline)):
                return self._check(spec, msg, steps, baseline, modules, states, timeout)
        finally:
            self._release_accused()

    def _candidate(
        self, image: bytes, steps: list[dict[str, Any]], modules: list[Any], states: list[Any], timeout: float
    ) -> list[Any]:
        """The steps of the code under judgement: loaded here, or, in a judge, in an accused
        process of its own (one per request: nothing of one candidate's process outlives it)."""
        if self.judging is None:
            return build_steps(self.device, image, steps, modules, states, *self._confined)
        self.progress("starting the candidate's process", "", None)
        accused, why = self.judging.take()
        if accused is None:
            raise Failed(Problem("sandbox", "", f"the candidate's sandboxed process did not start: {why}"))
        self.accused.append(accused)
        pipeline = RemotePipeline(accused, image, steps, timeout, self.device.helpers_image())
        self.pipelines.append(pipeline)
        return [pipeline]

    def _release_accused(self) -> None:
        for pipeline in self.pipelines:
            pipeline.close(self.device)
        self.pipelines.clear()
        for accused in self.accused:
            accused.retire()
        self.accused.clear()
        if self.judging is not None:  # the next request's processes start while this one is idle
            self.judging.refill()

    @property
    def _confined(self) -> tuple[bool, str]:
        """(confined, folder) for build_steps: this worker is never confined, so it refuses an
        untrusted entry (only an accused process runs one)."""
        return False, self.folder

    def _check(
        self,
        spec: Spec,
        msg: dict[str, Any],
        steps: list[Any],
        baseline: list[Any] | None,
        modules: list[Any],
        states: list[Any],
        timeout: float,
    ) -> dict[str, Any]:
        reset = restorer(states)
        runner = CaseRunner(self.device, spec, lambda case: self.device.sync(), reset)
        if msg.get("measure", True):
            runner.keep = {case_label(s) for s in spec.timing_cases()}
        problems: list[Problem] = []
        cases: list[dict[str, Any]] = []
        for sizes in spec.verification_sizes():
            label = case_label(sizes)
            try:
                runner.verify_case(steps, sizes, self.progress, timeout, baseline, int(msg.get("runs", 2)))
                cases.append({"case": label, "ok": True})
            except Failed as f:
                problems.append(f.problem)
                cases.append({"case": label, "ok": False})
                break
            except SpecError as e:
                problems.append(Problem("spec_error", label, f"case {label}: {e}"))
                break
        timings = []
        if msg.get("measure", True) and not problems:
            settings = TimingSettings.from_dict(msg.get("timing"))
            for sizes in spec.timing_cases():
                try:
                    verified = runner.kept.get(case_label(sizes), [])
                    timings.append(
                        self.time_case(spec, steps, sizes, settings, timeout, msg, reset, verified, baseline)
                    )
                except Failed as f:
                    problems.append(f.problem)
                    break
            for t in timings:
                if t["suspicious"]:
                    problems.append(Problem("suspicious", t["case"], t["suspicious"]))
        self.progress("unload", "", None)
        self._unload(modules, states)
        self._account("")
        if turns.ACTIVE is not None and turns.ACTIVE.waited_s:
            self.phase_s[WAITED] = turns.ACTIVE.waited_s - self._waited_before
        _note_phases("check", self.phase_s)
        return {
            "status": "ok" if not problems else "failed",
            "problems": [p.to_dict() for p in problems],
            "cases": cases,
            "timings": timings,
            "globals_restored": [n for st in states for n in st.names],
            "phase_s": {k: round(v, 4) for k, v in self.phase_s.items()},
        }

    def _unload(self, modules: list[Any], states: list[Any]) -> None:
        for st in states:
            st.free()
        for m in modules:
            if isinstance(m, EntryLibrary):
                m.close()
            else:
                self.device.unload(m)

    def _timed_sets(
        self,
        spec: Spec,
        sizes: dict[str, int],
        reset: Callable[[], None],
        verified: list[tuple[dict[str, Any], dict[str, Any]]] | None = None,
        baseline: list[Any] | None = None,
        judged: bool = False,
    ) -> TimedSets:
        self.progress("timing inputs", case_label(sizes), None)
        most = JUDGED_SETS if judged else None
        # Several workers on one GPU (`check`'s lanes) share its memory: each counts its share.
        memory = int(self.device.info().get("total_mem_bytes", 0)) // gpu_lanes()
        if judged:
            # Judged sets each get a mirror of their outputs too, and a copy of the outputs of
            # each side's first run on them (isolation.TimedSets.keep_first_outputs), and the GPU
            # is shared with the accused processes: count from what is free now, a third.
            memory = min(memory, int(self.device.free_memory()) // 3)
        host = procs.memory_available() // gpu_lanes()
        count = set_count(spec, sizes, memory, most or MAX_SETS, host)
        # A judged candidate is timed on inputs it never saw in verification.
        given = [] if judged else (verified or [])
        sets = TimedSets(self.device, spec, sizes, TIMING_SEED + spec.seed, reset, count, given, gated=judged)
        sets.warming = judged
        if spec.reference is None and baseline:
            sets.oracle = baseline_oracle(self.device, spec, sizes, baseline, reset)
        return sets

    def time_case(
        self,
        spec: Spec,
        steps: list[Step],
        sizes: dict[str, int],
        settings: TimingSettings,
        timeout: float,
        msg: dict[str, Any],
        reset: Callable[[], None] = lambda: None,
        verified: list[tuple[dict[str, Any], dict[str, Any]]] | None = None,
        baseline: list[Any] | None = None,
    ) -> dict[str, Any]:
        label = case_label(sizes)
        judged = _judged(steps)
        sets = self._timed_sets(spec, sizes, reset, verified or [], baseline, judged)
        try:
            if judged:
                self.progress("timing inputs bound", label, None)
            run = sets.runner(steps)
            tick = lambda: self.progress("timing", label, timeout + 1.0)  # noqa: E731
            # The GPU to this process alone while it times (other lanes' verification waits:
            # runner/turns.py); the wait is a host phase of its own, without the launch timeout.
            host = self._clock(sets) if judged else None  # a judged run: the judge's clock
            clock: Clock = host if host is not None else self.device
            self._spares_started(judged)
            self.progress(WAITING_FOR_THE_GPU, label, None)
            with turns.exclusive():
                tick()
                if host is not None:
                    self._measure_floor(host)
                if settings.cold_l2:
                    # The flush buffer (2x L2) is allocated at the first flush: before the count
                    # starts, or the launcher would be blamed for it (100 MiB on an H100).
                    self.device.flush_l2()
                before = memory_in_use(self.device)
                samples = measure(clock, run, settings, tick, sets.prepare)
            if host is not None:
                how = host.describe()
                _note_clock(label, how, ratio_figure_to_new(samples, host.fresh[0]))
                why = host.why_suspicious() or seen_inputs_faster(
                    samples, host.fresh[0], noise_s=_first_use_noise(self.device)
                )
                if why:
                    raise Failed(Problem("suspicious", label, f"case {label}: {why}"))
            else:
                how = "CUDA events around each launch"
            if any(isinstance(s, EntryStep) for s in steps):
                check_leaks(before, memory_in_use(self.device), len(samples), label)
            sets.check_outputs(label, self.progress)
            m = summarize(samples, settings.cold_l2, self.device_name(), label)
            result = {
                "case": label,
                "sizes": sizes,
                "measurement": m.to_dict(),
                "input_sets": len(sets.sets),
                "clock": how,
            }
            nbytes = sets.sets[0].bufs.nbytes
            result.update(figures(spec, sizes, nbytes, m.median_s, settings.cold_l2, msg.get("device") or {}))
            return result
        finally:
            sets.free()

    def _clock(self, sets: TimedSets) -> GpuClock:
        """The judge's clock for runs in another process (gated runs, on the GPU's clock),
        tagging each run by whether its inputs were new to that side (A or B); its switch floor
        is measured when its timing's exclusive turn begins (`_measure_floor`)."""
        return GpuClock(self.device, 0.0, sets.new_to, sets.stop_warming)

    def _spares_started(self, judged: bool) -> None:
        """Before a judged timing: no accused process of the next request still starting beside
        it (judge.AccusedPool.settle)."""
        if judged and self.judging is not None:
            self.judging.settle(lambda: self.progress("starting the next candidates' processes", "", None))

    def _measure_floor(self, clock: GpuClock) -> None:
        """Inside the timing's exclusive turn: the switch floor as the GPU is now
        (judge.SwitchFloor), in a process of its own that runs only kernel-lsp's code, kept for
        the worker's life. The fake GPU switches no context: its brackets are the accused's CPU
        time (judge.AccusedProcess.cpu_seconds), which has no floor to take off."""
        if self.device.fake:
            return
        if self.floor is None:
            assert self.judging is not None
            accused, why = self.judging.take()
            if accused is None:
                raise Failed(
                    Problem("sandbox", "", f"the candidate's sandboxed process did not start: {why}")
                )
            try:
                self.floor = SwitchFloor(self.device, accused, self.device.helpers_image())
            except (AccusedGone, Failed, GateFault):
                accused.retire()
                raise _gates_failed() from None
        try:
            clock.floor_s = self.floor.measure()
        except (AccusedGone, Failed, GateFault):
            self.floor.close()
            self.floor = None
            raise _gates_failed() from None

    def compare(self, msg: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Request: spec, steps_a (blobs[0], the baseline), steps_b (blobs[1], the candidate),
        timing, launch_timeout_s. Reply: cases [{case, a: [seconds], b: [seconds]}], problems
        (the outputs after timing, and the candidate's after one more launch, checked against the
        reference)."""
        self.phase_s, self.phase = {}, ""
        spec = load_spec(msg["spec"])
        timeout = float(msg.get("launch_timeout_s", 5.0))
        settings = TimingSettings.from_dict(msg.get("timing"))
        modules: list[Any] = []
        states: list[Any] = []
        self.progress("load", "", timeout)
        try:
            # In a judge both sides run in processes of their own: the same road for A and B.
            steps_a = self._candidate(blobs[0], msg["steps_a"], modules, states, timeout)
            steps_b = self._candidate(blobs[1], msg["steps_b"], modules, states, timeout)
            with self.device.legacy_stream(_on_legacy_stream(steps_a, steps_b)):
                return self._compare(spec, msg, steps_a, steps_b, modules, states, settings, timeout)
        finally:
            self._release_accused()

    def _compare(
        self,
        spec: Spec,
        msg: dict[str, Any],
        steps_a: list[Any],
        steps_b: list[Any],
        modules: list[Any],
        states: list[Any],
        settings: TimingSettings,
        timeout: float,
    ) -> dict[str, Any]:
        reset = restorer(states)
        cases, problems = [], []
        judged = _judged(steps_b)
        for sizes in spec.timing_cases():
            label = case_label(sizes)
            sets = self._timed_sets(spec, sizes, reset, baseline=steps_a, judged=judged)
            try:
                if judged:
                    self.progress("timing inputs bound", label, None)
                run_a, run_b = sets.runner(steps_a), sets.runner(steps_b)
                tick = lambda label=label: self.progress("timing", label, 2 * timeout + 1.0)  # noqa: E731
                host = self._clock(sets) if judged else None  # a judged run: the judge's clock
                clock: Clock = host if host is not None else self.device
                self._spares_started(judged)
                self.progress(WAITING_FOR_THE_GPU, label, None)
                with turns.exclusive():
                    tick()
                    if host is not None:
                        self._measure_floor(host)
                    a, b = measure_interleaved(clock, [run_a, run_b], settings, tick, sets.prepare)
                if host is not None:
                    calibration = ratio_figure_to_new(a, host.fresh[0])
                    noise = _first_use_noise(self.device)
                    why = host.why_suspicious() or seen_inputs_faster(b, host.fresh[1], calibration, noise)
                    if why:
                        problems.append(Problem("suspicious", label, f"case {label}: {why}").to_dict())
                sets.prepare()
                run_b()
                try:
                    sets.check_outputs(label, self.progress, include=sets.current)
                except Failed as f:
                    problems.append(f.problem.to_dict())
                median_b = float(sorted(b)[len(b) // 2])
                nbytes = sets.sets[0].bufs.nbytes
                figs = figures(spec, sizes, nbytes, median_b, settings.cold_l2, msg.get("device") or {})
                how = host.describe() if host is not None else "CUDA events around each launch"
                if host is not None:
                    _note_clock(f"A/B {label}", how, calibration, ratio_figure_to_new(b, host.fresh[1]))
                cases.append({"case": label, "a": a, "b": b, "suspicious": figs["suspicious"], "clock": how})
            finally:
                sets.free()
        self._unload(modules, states)
        self._account("")
        _note_phases("A/B", self.phase_s)
        return {"status": "ok" if not problems else "failed", "cases": cases, "problems": problems}

    def handle(self, msg: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "check":
            return self.check(msg, blobs)
        if op == "compare":
            return self.compare(msg, blobs)
        if op == "device_info":
            return {"status": "ok", "device": measure_device(self.device, blobs[0] if blobs else None)}
        raise ValueError(f"unknown op {op!r}")


def _probe_accused(device: int, fake: bool) -> tuple[AccusedPool | None, dict[str, Any] | None, str]:
    """Start one accused process to learn which sandbox opens the GPU here (fail closed: none
    is no judging at all): (the pool that starts them, holding this one as its first spare,
    how they are confined, why none started)."""
    forced = os.environ.get("KERNEL_LSP_SANDBOX", "")
    mechanisms = [forced] if forced else ["", "bwrap", "landlock"]
    accused, mechanism, why = start_accused(device, fake, mechanisms)
    if accused is None:
        return None, None, why
    confinement = dict(accused.hello.get("sandbox") or {})
    pool = AccusedPool(device, fake, mechanism)
    pool.adopt(accused)  # it has run nothing but kernel-lsp's code
    pool.refill()
    return pool, confinement, ""


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """Keep the real stdout for frames only; anything printed later goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


def _profiler() -> Any:
    """A developer's profile of every request (KERNEL_LSP_WORKER_PROFILE=DIR: cProfile stats in
    DIR/worker-PID.prof, rewritten after each request): where a verification's seconds go."""
    if not os.environ.get("KERNEL_LSP_WORKER_PROFILE"):
        return None
    import cProfile

    return cProfile.Profile()


def _note_clock(label: str, how: str, *seen_to_new: float) -> None:
    """Each judged timing's clock, and per side how much faster its figure was than its runs on
    new inputs (the reading of runner/judge.seen_inputs_faster), appended to
    KERNEL_LSP_JUDGE_CLOCKS (a file) or DIR/clocks.txt with KERNEL_LSP_WORKER_PROFILE=DIR: a
    developer's figures (benchmarks/judge_cost.py prints them)."""
    ratios = ", ".join(f"{r:.2f}" for r in seen_to_new)
    _note(f"{label}: {how}; figure/new inputs time per side: {ratios}")


def _note_phases(request: str, phase_s: dict[str, float]) -> None:
    """Where a request's time went (the `-v` phases), beside the clocks: which part of a judged
    round a grown batch makes longer (set making, references, timed runs)."""
    if phase_s:
        _note(f"{request} phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in phase_s.items() if v >= 0.005))


def _note(line: str) -> None:
    path = os.environ.get("KERNEL_LSP_JUDGE_CLOCKS")
    folder = os.environ.get("KERNEL_LSP_WORKER_PROFILE")
    if not path and folder:
        path = os.path.join(folder, "clocks.txt")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {line}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernel_lsp.runner.worker")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--fake", action="store_true")
    # A judge runs code it did not write only in accused processes (runner/judge.py), confined;
    # the worker itself runs the user's spec and the user's code, unconfined.
    parser.add_argument("--judge", action="store_true", help="run candidates in confined processes")
    args = parser.parse_args(argv)
    fake = args.fake  # the backend that started this worker says so (evaluation/worker_process.py)
    # Ends with the server or CLI that started it (a killed editor too), with whatever a spec
    # started. No memory limit: CUDA reserves far more address space than it uses.
    procs.become_worker(die_with_thread=False)
    stdin, stdout = _protocol_streams()

    def send(message: dict[str, Any]) -> None:
        write_message(stdout, message)

    device: Device | None = None
    reason = ""
    sandbox_error = ""
    confinement: dict[str, Any] | None = None  # how a judge's accused processes are confined
    try:
        device = FakeDevice(args.device) if fake else CudaDevice(args.device)
    except NoDevice as e:
        reason = str(e)
    except Exception as e:  # a broken driver install must still give a plain reason
        reason = f"cannot open the GPU: {type(e).__name__}: {e}"
    judging: AccusedPool | None = None
    if args.judge and device is not None:
        judging, confinement, sandbox_error = _probe_accused(args.device, fake)
        if judging is None:
            reason, device = f"no sandbox for host code an LLM wrote: {sandbox_error}", None
        else:
            device.share_buffers = True  # the case's buffers are mapped by the accused
            case_memo.ACTIVE = case_memo.CaseMemo()  # a judge lives for one optimize run
    if device is not None:
        # Turns on the GPU with every other kernel-lsp worker on it: timed launches alone.
        try:
            turns.ACTIVE = turns.GpuTurns(turns.device_key(device.info(), fake))
        except OSError as e:  # no turns: timed launches may then overlap other processes' work
            print(f"kernel-lsp worker: no GPU turns with other workers ({e})", file=sys.stderr)
    worker = Worker(device, send, judging=judging) if device is not None else None
    profiler = _profiler()

    while True:
        try:
            msg, blobs = read_message(stdin)
        except EOFError:
            return 0
        op = msg.get("op")
        if op == "shutdown":
            send({"event": "result", "status": "ok"})
            return 0
        if op == "hello":
            send(
                {
                    "event": "result",
                    "status": "ok",
                    "available": worker is not None,
                    "reason": reason,
                    "device": device.info() if device is not None else None,
                    "pid": os.getpid(),
                    "sandbox": confinement,
                    "sandbox_error": sandbox_error,
                }
            )
            continue
        if worker is None:
            send({"event": "error", "message": f"no GPU: {reason}"})
            continue
        try:
            if profiler is not None:
                reply = profiler.runcall(worker.handle, msg, blobs)
                profiler.dump_stats(
                    os.path.join(os.environ["KERNEL_LSP_WORKER_PROFILE"], f"worker-{os.getpid()}.prof")
                )
            else:
                reply = worker.handle(msg, blobs)
            send({"event": "result", **reply})
        except Failed as f:
            send(
                {
                    "event": "result",
                    "status": "failed",
                    "problems": [f.problem.to_dict()],
                    "cases": [],
                    "timings": [],
                }
            )
        except DeviceFault as e:
            case = worker.case
            where = f" in case {case}" if case else ""
            kind = "crash" if e.sticky else "launch_error"
            problem = Problem(kind, case, f"{e}{where} ({worker.phase})" if e.sticky else f"{e}{where}")
            send(
                {
                    "event": "result",
                    "status": "failed",
                    "problems": [problem.to_dict()],
                    "cases": [],
                    "timings": [],
                    "fatal": e.sticky,
                }
            )
            if e.sticky:
                return FATAL_EXIT
        except Exception as e:
            tb = traceback.format_exc(limit=6)
            send({"event": "error", "message": f"{type(e).__name__}: {e}", "traceback": tb})


if __name__ == "__main__":
    procs.end_process_group(main())  # with whatever a spec started
