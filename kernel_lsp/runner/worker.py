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
from kernel_lsp.runner.protocol import read_message, write_message
from kernel_lsp.runner.timing import TimingSettings, measure, measure_interleaved
from kernel_lsp.runner.verify import (
    TIMING_SEED,
    Buffers,
    CaseRunner,
    Failed,
    Problem,
    Step,
    launcher,
)
from kernel_lsp.spec import (
    InOut,
    Spec,
    SpecError,
    case_label,
    load_specs,
    make_inputs,
    run_reference,
)
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


def build_steps(device: Any, cubin: bytes, steps: list[dict[str, Any]], modules: list[Any]) -> list[Step]:
    module = device.load(cubin)
    modules.append(module)
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


def min_bytes(spec: Spec, bufs: Buffers) -> int:
    """What any correct kernel must move at least: each input read once, each output written."""
    total = 0
    for name, arg in spec.buffers().items():
        if arg.kind in ("in", "out"):
            total += bufs.nbytes[name]
        elif arg.kind == "inout":
            total += 2 * bufs.nbytes[name]
    return total


def _figures(spec: Spec, bufs: Buffers, median: float, cold: bool, dev: dict[str, Any]) -> dict[str, Any]:
    work = spec.work_for(bufs.sizes)
    sol_bytes = min_bytes(spec, bufs)
    nbytes = float(work.get("bytes", sol_bytes))
    flops = float(work.get("flops", 0.0))
    bandwidth = float(dev.get("copy_bandwidth_Bps") or 0.0)
    peaks: dict[str, float] = dev.get("peak_flops") or {}
    out_dtypes = [a.dtype for a in spec.outputs().values()]
    flop_dtype = str(work.get("dtype", out_dtypes[0] if out_dtypes else "float32"))
    if flop_dtype not in peaks:
        flop_dtype = "float32"
    peak = float(peaks.get(flop_dtype, 0.0))
    t_mem = nbytes / bandwidth if bandwidth else 0.0
    t_flop = flops / peak if peak else 0.0
    bound_t, bound = (t_mem, "DRAM") if t_mem >= t_flop else (t_flop, f"{flop_dtype} peak")
    suspicious = None
    sol_t = min(nbytes, sol_bytes) / bandwidth if bandwidth else 0.0
    if cold and sol_t and median < 0.85 * sol_t:
        suspicious = (
            f"{median * 1e6:.2f} us is below the speed-of-light bound of {sol_t * 1e6:.2f} us "
            f"({min(nbytes, sol_bytes):.0f} bytes at the measured {bandwidth / 1e9:.0f} GB/s): "
            "the kernel cannot have done the work"
        )
    return {
        "bytes": nbytes,
        "flops": flops,
        "bandwidth_Bps": nbytes / median if median else 0.0,
        "flops_per_s": flops / median if median else 0.0,
        "roofline": bound_t / median if median and bound_t else 0.0,
        "bound": bound,
        "suspicious": suspicious,
    }


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
        self.progress("load", "", timeout)
        steps = build_steps(self.device, blobs[0], msg["steps"], modules)
        baseline = (
            build_steps(self.device, blobs[1], msg["baseline_steps"], modules)
            if msg.get("baseline_steps")
            else None
        )
        runner = CaseRunner(self.device, spec, lambda case: self.device.sync())
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
                    timings.append(self.time_case(spec, steps, sizes, settings, timeout, msg))
                except Failed as f:
                    problems.append(f.problem)
                    break
            for t in timings:
                if t["suspicious"]:
                    problems.append(Problem("suspicious", t["case"], t["suspicious"]))
        for m in modules:
            self.device.unload(m)
        return {
            "status": "ok" if not problems else "failed",
            "problems": [p.to_dict() for p in problems],
            "cases": cases,
            "timings": timings,
        }

    def _timing_setup(self, spec: Spec, sizes: dict[str, int]) -> tuple[Buffers, dict[str, Any], str]:
        label = case_label(sizes)
        self.progress("timing inputs", label, None)
        bufs = Buffers(self.device, spec, sizes)
        inputs = make_inputs(spec, sizes, TIMING_SEED + spec.seed, 0)
        for name, array in inputs.items():
            bufs.upload(name, array)
        bufs.poison(0xFF)
        return bufs, inputs, label

    def _check_timed_outputs(self, spec: Spec, bufs: Buffers, inputs: dict[str, Any], label: str) -> None:
        """The outputs left by the timed launches must be right too (no fast path while timed).
        Skipped with InOut buffers, which repeated launches legitimately keep changing."""
        if any(isinstance(a, InOut) for a in spec.args.values()):
            return
        self.progress("checking timed outputs", label, None)
        reference = run_reference(spec, bufs.sizes, inputs)
        outs = {n: bufs.read(n) for n in spec.outputs()}
        CaseRunner(self.device, spec, lambda c: None).check_against(
            outs, reference, label, "timing_mismatch", "expected (timing inputs)"
        )

    def time_case(
        self,
        spec: Spec,
        steps: list[Step],
        sizes: dict[str, int],
        settings: TimingSettings,
        timeout: float,
        msg: dict[str, Any],
    ) -> dict[str, Any]:
        bufs, inputs, label = self._timing_setup(spec, sizes)
        try:
            launch = launcher(self.device, steps, bufs)
            zero = any(getattr(a, "zero", False) for a in spec.args.values())

            def run() -> None:
                if zero:
                    bufs.zero_scratch()
                launch()

            tick = lambda: self.progress("timing", label, timeout + 1.0)  # noqa: E731
            tick()
            samples = measure(self.device, run, settings, tick)
            self._check_timed_outputs(spec, bufs, inputs, label)
            m = summarize(samples, settings.cold_l2, self.device_name(), label)
            result = {"case": label, "sizes": sizes, "measurement": m.to_dict()}
            result.update(_figures(spec, bufs, m.median_s, settings.cold_l2, msg.get("device") or {}))
            return result
        finally:
            bufs.free()

    def compare(self, msg: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
        """Request: spec, steps_a (blobs[0], the baseline), steps_b (blobs[1], the candidate),
        timing, launch_timeout_s. Reply: cases [{case, a: [seconds], b: [seconds]}], problems
        (the candidate's outputs after timing, checked against the reference)."""
        spec = load_spec(msg["spec"])
        timeout = float(msg.get("launch_timeout_s", 5.0))
        settings = TimingSettings.from_dict(msg.get("timing"))
        modules: list[Any] = []
        self.progress("load", "", timeout)
        steps_a = build_steps(self.device, blobs[0], msg["steps_a"], modules)
        steps_b = build_steps(self.device, blobs[1], msg["steps_b"], modules)
        cases, problems = [], []
        for sizes in spec.timing_cases():
            bufs, inputs, label = self._timing_setup(spec, sizes)
            try:
                run_a, run_b = launcher(self.device, steps_a, bufs), launcher(self.device, steps_b, bufs)
                tick = lambda label=label: self.progress("timing", label, 2 * timeout + 1.0)  # noqa: E731
                tick()
                a, b = measure_interleaved(self.device, [run_a, run_b], settings, tick)
                bufs.poison(0x7F)
                run_b()
                self.device.sync()
                try:
                    self._check_timed_outputs(spec, bufs, inputs, label)
                except Failed as f:
                    problems.append(f.problem.to_dict())
                figs = _figures(
                    spec, bufs, float(sorted(b)[len(b) // 2]), settings.cold_l2, msg.get("device") or {}
                )
                cases.append({"case": label, "a": a, "b": b, "suspicious": figs["suspicious"]})
            finally:
                bufs.free()
        for m in modules:
            self.device.unload(m)
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
