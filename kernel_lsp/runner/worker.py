"""The GPU worker: a separate process per GPU that loads CUBINs, runs the verification cases and
times launches. Started by kernel_lsp.gpu.GpuSession as

    python -m kernel_lsp.runner.worker [--device N] [--fake]

and driven through kernel_lsp.runner.protocol frames on stdin/stdout (the request and reply
fields are listed in `handle`). A hang is the client's business (it kills this process); a sticky
CUDA error makes this process report (`"fatal": true`) and exit, because its context is gone.
`--fake` (or KERNEL_LSP_FAKE_GPU=1) uses runner/fake.py instead of a GPU, for CI.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from kernel_lsp.runner.device import CudaDevice, DeviceFault, NoDevice
from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.hardware import measure_device
from kernel_lsp.runner.isolation import ModuleState, TimedSets, restorer, set_count
from kernel_lsp.runner.protocol import read_message, write_message
from kernel_lsp.runner.roofline import figures
from kernel_lsp.runner.timing import TimingSettings, measure, measure_interleaved
from kernel_lsp.runner.verify import (
    CaseRunner,
    Failed,
    Problem,
    Step,
)
from kernel_lsp.spec import (
    Spec,
    SpecError,
    case_label,
    load_specs,
)
from kernel_lsp.spec.inputs import TIMING_SEED
from kernel_lsp.stats import summarize

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
            return spec
    raise Failed(Problem("spec_error", "", f"no spec for kernel `{want}` in {desc['path']}"))


def build_steps(
    device: Any,
    cubin: bytes,
    steps: list[dict[str, Any]],
    modules: list[Any],
    states: list[ModuleState] | None = None,
) -> list[Step]:
    """Load the CUBIN and resolve each step's function; with `states`, also keep the image of
    the module's mutable globals for restoring before launches (runner/isolation.py)."""
    module = device.load(cubin)
    modules.append(module)
    if states is not None:
        states.append(ModuleState.snapshot(device, module, cubin))
    return [
        Step(
            s["kernel"],
            device.function(module, s["symbol"]),
            list(s["params"]),
            s["grid"],
            s["block"],
            str(s.get("smem") or "0"),
            dict(s.get("constants") or {}),
        )
        for s in steps
    ]


class Worker:
    def __init__(self, device: Any, send: Send):
        self.device = device
        self.send = send
        self.phase = ""
        self.case = ""
        self._dev_info: dict[str, Any] | None = None

    def progress(self, phase: str, case: str, timeout_s: float | None) -> None:
        self.phase, self.case = phase, case
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
        spec = load_spec(msg["spec"])
        timeout = float(msg.get("launch_timeout_s", 5.0))
        modules: list[Any] = []
        states: list[ModuleState] = []
        self.progress("load", "", timeout)
        steps = build_steps(self.device, blobs[0], msg["steps"], modules, states)
        baseline = (
            build_steps(self.device, blobs[1], msg["baseline_steps"], modules, states)
            if msg.get("baseline_steps")
            else None
        )
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
                        self.time_case(spec, steps, sizes, settings, timeout, msg, reset, verified)
                    )
                except Failed as f:
                    problems.append(f.problem)
                    break
            for t in timings:
                if t["suspicious"]:
                    problems.append(Problem("suspicious", t["case"], t["suspicious"]))
        self._unload(modules, states)
        return {
            "status": "ok" if not problems else "failed",
            "problems": [p.to_dict() for p in problems],
            "cases": cases,
            "timings": timings,
            "globals_restored": [n for st in states for n in st.names],
        }

    def _unload(self, modules: list[Any], states: list[ModuleState]) -> None:
        for st in states:
            st.free()
        for m in modules:
            self.device.unload(m)

    def _timed_sets(
        self,
        spec: Spec,
        sizes: dict[str, int],
        reset: Callable[[], None],
        verified: list[tuple[dict[str, Any], dict[str, Any]]] | None = None,
    ) -> TimedSets:
        self.progress("timing inputs", case_label(sizes), None)
        count = set_count(spec, sizes, int(self.device.info().get("total_mem_bytes", 0)))
        return TimedSets(self.device, spec, sizes, TIMING_SEED + spec.seed, reset, count, verified or [])

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
    ) -> dict[str, Any]:
        label = case_label(sizes)
        sets = self._timed_sets(spec, sizes, reset, verified or [])
        try:
            run = sets.runner(steps)
            tick = lambda: self.progress("timing", label, timeout + 1.0)  # noqa: E731
            tick()
            samples = measure(self.device, run, settings, tick, sets.prepare)
            sets.check_outputs(label, self.progress)
            m = summarize(samples, settings.cold_l2, self.device_name(), label)
            result = {"case": label, "sizes": sizes, "measurement": m.to_dict(), "input_sets": len(sets.sets)}
            nbytes = sets.sets[0].bufs.nbytes
            result.update(figures(spec, sizes, nbytes, m.median_s, settings.cold_l2, msg.get("device") or {}))
            return result
        finally:
            sets.free()

    def compare(self, msg: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Request: spec, steps_a (blobs[0], the baseline), steps_b (blobs[1], the candidate),
        timing, launch_timeout_s. Reply: cases [{case, a: [seconds], b: [seconds]}], problems
        (the outputs after timing, and the candidate's after one more launch, checked against the
        reference)."""
        spec = load_spec(msg["spec"])
        timeout = float(msg.get("launch_timeout_s", 5.0))
        settings = TimingSettings.from_dict(msg.get("timing"))
        modules: list[Any] = []
        states: list[ModuleState] = []
        self.progress("load", "", timeout)
        steps_a = build_steps(self.device, blobs[0], msg["steps_a"], modules, states)
        steps_b = build_steps(self.device, blobs[1], msg["steps_b"], modules, states)
        reset = restorer(states)
        cases, problems = [], []
        for sizes in spec.timing_cases():
            label = case_label(sizes)
            sets = self._timed_sets(spec, sizes, reset)
            try:
                run_a, run_b = sets.runner(steps_a), sets.runner(steps_b)
                tick = lambda label=label: self.progress("timing", label, 2 * timeout + 1.0)  # noqa: E731
                tick()
                a, b = measure_interleaved(self.device, [run_a, run_b], settings, tick, sets.prepare)
                sets.prepare()
                run_b()
                try:
                    sets.check_outputs(label, self.progress, include=sets.current)
                except Failed as f:
                    problems.append(f.problem.to_dict())
                median_b = float(sorted(b)[len(b) // 2])
                nbytes = sets.sets[0].bufs.nbytes
                figs = figures(spec, sizes, nbytes, median_b, settings.cold_l2, msg.get("device") or {})
                cases.append({"case": label, "a": a, "b": b, "suspicious": figs["suspicious"]})
            finally:
                sets.free()
        self._unload(modules, states)
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


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """Keep the real stdout for frames only; anything printed later goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernel_lsp.runner.worker")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--fake", action="store_true")
    args = parser.parse_args(argv)
    fake = args.fake or os.environ.get("KERNEL_LSP_FAKE_GPU", "") not in ("", "0")
    stdin, stdout = _protocol_streams()

    def send(message: dict[str, Any]) -> None:
        write_message(stdout, message)

    device: Any = None
    reason = ""
    try:
        device = FakeDevice(args.device) if fake else CudaDevice(args.device)
    except NoDevice as e:
        reason = str(e)
    except Exception as e:  # a broken driver install must still give a plain reason
        reason = f"cannot open the GPU: {type(e).__name__}: {e}"
    worker = Worker(device, send) if device is not None else None

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
                }
            )
            continue
        if worker is None:
            send({"event": "error", "message": f"no GPU: {reason}"})
            continue
        try:
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
    sys.exit(main())
