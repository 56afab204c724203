"""The GPU client the server, the CLI and the optimizer use: GpuSession.

All GPU work happens in a worker process (kernel_lsp.runner.worker); this module never imports
CUDA driver APIs. It compiles with kernel_lsp.compile for the device's exact arch, sends the CUBIN
to the worker, and turns the worker's answers into plain dataclasses. A hang or a crash kills only
the worker: the session restarts it on the next request and says what happened.

    with GpuSession() as gpu:
        if gpu.available:
            check = gpu.check(source, "vadd.cu", "vadd.spec.py", "vadd", CompileOptions())
            print(check.ok, check.message, check.headline)

Without a GPU (no driver, no device, CUDA_VISIBLE_DEVICES empty) `available` is False and
`reason` says why; nothing raises.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernel_lsp.model import Diagnostic, Severity
from kernel_lsp.runner.hardware import (
    FMA_PEAK_SOURCE,
    DeviceInfo,
    load_cached,
    save_cached,
)
from kernel_lsp.runner.profile import OccupancyFigure, ProfileReport, find_ncu, profile_kernels
from kernel_lsp.runner.protocol import ProtocolError, read_message, write_message
from kernel_lsp.runner.timing import TimingSettings
from kernel_lsp.runner.verify import Problem
from kernel_lsp.source import find_kernels, parse_directives
from kernel_lsp.spec import (
    Spec,
    SpecLoad,
    check_spec,
    distributions,
    load_specs,
    source_constants,
    spec_path_for,
)
from kernel_lsp.stats import Measurement, bootstrap_ratio, format_seconds, summarize

GPU_SOURCE = "kernel-lsp gpu"
PROFILES_KEPT = 64  # profiles of recent source versions, a few KB each
SpecArg = str | Spec | Sequence[Spec] | SpecLoad | None
ProgressFn = Callable[[str, str], None]


# --- results ------------------------------------------------------------------------------------


@dataclass
class CaseTiming:
    case: str
    sizes: dict[str, int]
    measurement: Measurement
    bytes: float = 0.0
    flops: float = 0.0
    bandwidth_Bps: float = 0.0
    flops_per_s: float = 0.0
    roofline: float = 0.0  # fraction of the roofline bound reached (1.0 = at the bound)
    bound: str = ""  # "DRAM" or "<dtype> peak"
    suspicious: str | None = None


@dataclass
class KernelCheck:
    kernel: str
    status: str  # ok, failed, unavailable, compile_error, spec_error, error
    ok: bool = False
    message: str = ""
    problems: list[Problem] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)  # [{case, ok}] verified cases
    timings: list[CaseTiming] = field(default_factory=list)
    device: DeviceInfo | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    duration_s: float = 0.0
    spec_name: str = ""
    # Achieved occupancy per kernel of the pipeline, from ncu on the largest timed case; the note
    # says why there is none (not asked for, no ncu, counters not permitted).
    occupancy: list[OccupancyFigure] = field(default_factory=list)
    occupancy_note: str = ""
    # The same run's profile: limiter, speed of light, stalls, hottest lines (None until read).
    profile: ProfileReport | None = None

    @property
    def headline(self) -> str:
        """`0.201 ms · 96% of DRAM roofline · H200` for the largest timed case."""
        if not self.ok:
            return self.message
        if not self.timings:
            return "verified" + (f" · {self.device.short_name}" if self.device else "")
        t = self.timings[-1]
        parts = [format_seconds(t.measurement.median_s)]
        if t.roofline:
            parts.append(f"{t.roofline * 100:.0f}% of {t.bound} roofline")
        if self.device:
            parts.append(self.device.short_name)
        return " · ".join(parts)


@dataclass
class Comparison:
    """Candidate against baseline, timed interleaved. speedup = baseline median / candidate
    median; [ci_low, ci_high] its bootstrap interval. `faster` only when the lower bound clears
    the threshold and nothing is suspicious or wrong."""

    speedup: float
    ci_low: float
    ci_high: float
    n: int
    baseline: Measurement | None
    candidate: Measurement | None
    case: str = ""
    faster: bool = False
    suspicious: str | None = None
    problems: list[Problem] = field(default_factory=list)
    error: str | None = None


class WorkerHung(RuntimeError):
    def __init__(self, phase: str, case: str, timeout_s: float):
        where = f" in case {case}" if case else ""
        super().__init__(f"timed out after {timeout_s:g} s{where} ({phase})")
        self.phase, self.case, self.timeout_s = phase, case, timeout_s


class WorkerDied(RuntimeError):
    def __init__(self, message: str, phase: str = "", case: str = ""):
        super().__init__(message)
        self.phase, self.case = phase, case


def _defines(options: Any) -> tuple[str, ...]:
    return tuple(getattr(options, "defines", ()) or ())


def entry_symbols(cubin: bytes, names: Sequence[str]) -> dict[str, str]:
    """{source name: symbol} read from the CUBIN's string table: the name itself (extern "C") or
    its Itanium mangling `_Z<len><name>...` (a plain, non-template function)."""
    strings = [s.decode(errors="replace") for s in cubin.split(b"\0") if s]
    found: dict[str, str] = {}
    for name in names:
        prefix = f"_Z{len(name)}{name}"
        for text in strings:
            if text == name or (text.startswith(prefix) and text[len(prefix) :][:1].isalpha()):
                found[name] = text
                break
    return found


# --- the worker process -------------------------------------------------------------------------


class WorkerProcess:
    """One worker subprocess plus a reader thread that queues its frames."""

    def __init__(self, device: int, fake: bool, env: dict[str, str] | None = None):
        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [sys.executable, "-m", "kernel_lsp.runner.worker", "--device", str(device)]
        if fake:
            cmd.append("--fake")
        # Lives as long as the worker; closed in close().
        self.log = tempfile.TemporaryFile(prefix="kernel-lsp-worker-")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=child_env
        )
        self.frames: queue.Queue[tuple[dict[str, Any], list[bytes]] | BaseException] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                self.frames.put(read_message(self.proc.stdout))
        except (EOFError, ProtocolError, OSError, ValueError) as e:
            self.frames.put(e)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - limit))
            return self.log.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def request(
        self,
        message: dict[str, Any],
        blobs: list[bytes] | None,
        first_timeout_s: float,
        on_progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Send one request; return its result frame. Raises WorkerHung (after killing the
        worker) when no frame arrives within the timeout of the last progress frame, WorkerDied
        when the worker exits mid-request."""
        phase, case, timeout = str(message.get("op")), "", first_timeout_s
        try:
            assert self.proc.stdin is not None
            write_message(self.proc.stdin, message, blobs)
        except (BrokenPipeError, OSError) as e:
            raise WorkerDied(f"GPU worker is gone: {e}") from None
        while True:
            try:
                item = self.frames.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                raise WorkerHung(phase, case, timeout) from None
            if isinstance(item, BaseException):
                code = self.proc.wait(timeout=5) if self.proc.poll() is None else self.proc.poll()
                tail = self.stderr_tail()
                raise WorkerDied(
                    f"GPU worker died (exit code {code})"
                    + (f" in case {case}" if case else "")
                    + (f" ({phase})" if phase else "")
                    + (f": {tail.splitlines()[-1]}" if tail else ""),
                    phase,
                    case,
                )
            frame, _ = item
            event = frame.get("event")
            if event == "progress":
                phase, case = frame.get("phase", phase), frame.get("case", case)
                timeout = float(frame.get("timeout_s") or first_timeout_s)
                if on_progress:
                    with contextlib.suppress(Exception):
                        on_progress(phase, case)
                continue
            if event == "error":
                raise RuntimeError(frame.get("message", "worker error"))
            return frame

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request({"op": "shutdown"}, None, 5.0)
                self.proc.wait(timeout=5)
            except Exception:
                self.kill()
        with contextlib.suppress(Exception):
            self.log.close()


# --- the session --------------------------------------------------------------------------------


def _hidden_by_env() -> str | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return "CUDA_VISIBLE_DEVICES hides every GPU"
    return None


class GpuSession:
    """A connection to one GPU through a worker process. Thread-safe (one request at a time)."""

    def __init__(
        self,
        device: int | None = None,
        launch_timeout_s: float = 5.0,
        timing: TimingSettings | None = None,
        fake: bool | None = None,
        start_timeout_s: float = 60.0,
        use_device_cache: bool = True,
    ):
        self.device_index = 0 if device is None else int(device)
        self.launch_timeout_s = launch_timeout_s
        self.timing = timing or TimingSettings()
        self.fake = fake if fake is not None else os.environ.get("KERNEL_LSP_FAKE_GPU", "") not in ("", "0")
        self.start_timeout_s = start_timeout_s
        self.use_device_cache = use_device_cache
        self.restarts = 0
        self._lock = threading.RLock()
        self._worker: WorkerProcess | None = None
        self._hello: dict[str, Any] | None = None
        self._reason: str | None = None
        self._device: DeviceInfo | None = None
        self._retry_at = 0.0
        # One profile per source version (CUBIN, text, launch steps, timed case).
        self._profiles: dict[str, ProfileReport] = {}

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> GpuSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def _ensure_worker(self) -> WorkerProcess | None:
        """A live worker, starting one if needed; None (with _reason set) when there is no GPU."""
        if self._worker is not None and self._worker.alive:
            return self._worker
        if self._worker is not None:
            self._worker.close()
            self._worker = None
            self.restarts += 1
        if self._reason and time.monotonic() < self._retry_at:
            return None  # no GPU a moment ago: do not pay a worker start on every call
        if not self.fake:
            hidden = _hidden_by_env()
            if hidden:
                self._reason = hidden
                return None
        try:
            worker = WorkerProcess(self.device_index, self.fake)
            hello = worker.request({"op": "hello"}, None, self.start_timeout_s)
        except Exception as e:
            self._reason = f"GPU worker did not start: {e}"
            self._retry_at = time.monotonic() + 60.0
            return None
        if not hello.get("available"):
            self._reason = str(hello.get("reason") or "no GPU")
            self._retry_at = time.monotonic() + 60.0
            worker.close()
            return None
        self._worker, self._hello, self._reason = worker, hello, None
        return worker

    @property
    def available(self) -> bool:
        with self._lock:
            return self._ensure_worker() is not None

    @property
    def reason(self) -> str:
        """Why `available` is False ("" when it is True)."""
        with self._lock:
            self._ensure_worker()
            return self._reason or ""

    @property
    def worker_pid(self) -> int | None:
        return self._worker.proc.pid if self._worker is not None else None

    @property
    def device(self) -> DeviceInfo | None:
        """The device description: attributes, measured copy bandwidth, peak FLOP/s per dtype.
        Measured once per device and cached on disk."""
        with self._lock:
            if self._device is not None:
                return self._device
            worker = self._ensure_worker()
            if worker is None or self._hello is None:
                return None
            attrs = self._hello["device"]
            cached = load_cached(attrs) if self.use_device_cache and not self.fake else None
            if cached is not None:
                self._device = cached
                return cached
            fma = self._compile_helper(FMA_PEAK_SOURCE, attrs.get("arch", "sm_90"))
            try:
                reply = worker.request({"op": "device_info"}, [fma] if fma else None, 120.0)
                info = DeviceInfo.from_dict(reply["device"])
            except Exception:
                info = DeviceInfo.from_dict(attrs)  # bare attributes rather than nothing
            if self.use_device_cache and not self.fake and info.copy_bandwidth_Bps:
                save_cached(info)
            self._device = info
            return info

    @staticmethod
    def _compile_helper(source: str, arch: str) -> bytes | None:
        try:
            from kernel_lsp.compile import CompileOptions, compile_source

            result = compile_source(source, "kernel_lsp_helper.cu", CompileOptions(arch=arch))
            return result.cubin if result.ok else None
        except Exception:
            return None

    def _request(
        self,
        message: dict[str, Any],
        blobs: list[bytes],
        on_progress: ProgressFn | None,
    ) -> dict[str, Any]:
        worker = self._ensure_worker()
        if worker is None:
            raise WorkerDied(f"no GPU: {self._reason}")
        message = dict(message, launch_timeout_s=self.launch_timeout_s)
        try:
            reply = worker.request(message, blobs, max(30.0, self.launch_timeout_s), on_progress)
        except (WorkerHung, WorkerDied):
            worker.kill()  # restarted on the next request
            raise
        if reply.get("fatal"):
            worker.kill()
        return reply

    # --- compiling --------------------------------------------------------------------------------

    def compile_options_for_device(self, options: Any) -> Any:
        """The options with the device's exact arch (keeping an `a` variant such as sm_90a)."""
        from kernel_lsp.compile import CompileOptions

        options = options or CompileOptions()
        dev = self.device
        if dev is None:
            return options
        if options.arch.rstrip("af") != dev.arch:
            options = replace(options, arch=dev.arch)
        return options

    def _build(
        self, source: str, path: str, kernels: list[str], options: Any
    ) -> tuple[bytes | None, dict[str, str], list[Diagnostic]]:
        """CUBIN, {source name: entry symbol}, and the compile errors."""
        from kernel_lsp.compile import compile_source

        result = compile_source(source, path, self.compile_options_for_device(options))
        errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
        if not result.ok or result.cubin is None:
            return (
                None,
                {},
                errors or [Diagnostic(path, 1, 1, Severity.ERROR, "compile failed", source=GPU_SOURCE)],
            )
        symbols = {k.name: k.mangled for k in result.kernels}
        missing = [k for k in kernels if k not in symbols]
        if missing:  # resources not parsed from the log: read the entry symbols from the CUBIN
            symbols.update(entry_symbols(result.cubin, missing))
        return result.cubin, symbols, []

    # --- spec resolution ----------------------------------------------------------------------

    @staticmethod
    def _resolve_spec(
        specs: SpecArg, path: str, kernel: str | None, spec_source: str | None
    ) -> tuple[Spec | None, list[Diagnostic]]:
        if specs is None:
            specs = spec_path_for(path)
        if isinstance(specs, str):
            if spec_source is None and not os.path.exists(specs):
                return None, [
                    Diagnostic(
                        path,
                        1,
                        1,
                        Severity.INFO,
                        f"no spec ({os.path.basename(specs)})",
                        code="no-spec",
                        source=GPU_SOURCE,
                    )
                ]
            specs = load_specs(specs, spec_source)
        if isinstance(specs, SpecLoad):
            errors = [d for d in specs.diagnostics if d.severity is Severity.ERROR]
            if errors:
                return None, errors
            candidates = specs.specs
        elif isinstance(specs, Spec):
            candidates = [specs]
        else:
            candidates = list(specs)
        for spec in candidates:
            if kernel in (None, spec.kernel, spec.name):
                return spec, []
        return None, [
            Diagnostic(
                path, 1, 1, Severity.INFO, f"no spec for kernel `{kernel}`", code="no-spec", source=GPU_SOURCE
            )
        ]

    @staticmethod
    def _steps(
        spec: Spec, source: str, symbols: dict[str, str], defines: Sequence[str] = ()
    ) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
        sigs = find_kernels(source)
        directives = parse_directives(source)
        constants = source_constants(source, defines)
        problems = [d for d in check_spec(spec, sigs, directives, constants) if d.severity is Severity.ERROR]
        if problems:
            return [], problems
        by_name = {s.name: s for s in sigs}
        steps, seen = [], {}
        for kname in spec.kernels:
            i = seen.get(kname, 0)
            seen[kname] = i + 1
            d = directives.launches_of(kname)[i]
            if kname not in symbols:
                return [], [
                    Diagnostic(
                        spec.path or "",
                        spec.line or 1,
                        1,
                        Severity.ERROR,
                        f"kernel `{kname}` not in the compiled module (a template needs an "
                        "explicit instantiation)",
                        code="spec-kernel",
                        source=GPU_SOURCE,
                    )
                ]
            steps.append(
                {
                    "kernel": kname,
                    "symbol": symbols[kname],
                    "params": [p.name for p in by_name[kname].params],
                    "grid": d.grid,
                    "block": d.block,
                    "smem": d.smem,
                    "constants": constants,
                }
            )
        return steps, []

    @staticmethod
    def _spec_desc(spec: Spec, spec_source: str | None) -> dict[str, Any]:
        if not spec.path:
            raise ValueError("the spec must come from a spec file (load_specs sets its path)")
        return {"path": spec.path, "source": spec_source, "kernel": spec.kernel}

    # --- checking -----------------------------------------------------------------------------

    def check(
        self,
        source: str,
        path: str,
        specs_or_spec_path: SpecArg = None,
        kernel: str | None = None,
        compile_options: Any = None,
        measure: bool = True,
        reference_outputs_from: str | None = None,
        spec_source: str | None = None,
        on_progress: ProgressFn | None = None,
    ) -> KernelCheck:
        """Compile `source` for this GPU, verify `kernel` against its spec (and, with
        `reference_outputs_from`, against the outputs of that original source's kernel on the same
        inputs), then time it unless `measure` is False. Never raises. Achieved occupancy comes
        after, from `add_occupancy`."""
        start = time.perf_counter()
        kernel_line = next((k.line for k in find_kernels(source) if k.name == kernel), 1)

        def done(check: KernelCheck) -> KernelCheck:
            check.duration_s = time.perf_counter() - start
            check.device = check.device or self._device
            if not check.diagnostics and check.problems:
                check.diagnostics = [
                    Diagnostic(
                        path,
                        kernel_line,
                        1,
                        Severity.WARNING if p.kind == "suspicious" else Severity.ERROR,
                        p.message,
                        code=f"gpu-{p.kind.replace('_', '-')}",
                        source=GPU_SOURCE,
                    )
                    for p in check.problems
                ]
            return check

        with self._lock:
            if not self.available:
                return done(KernelCheck(kernel or "", "unavailable", message=f"no GPU: {self.reason}"))
            spec, diags = self._resolve_spec(specs_or_spec_path, path, kernel, spec_source)
            if spec is None:
                status = "spec_error" if any(d.severity is Severity.ERROR for d in diags) else "no_spec"
                return done(
                    KernelCheck(
                        kernel or "", status, message=diags[0].message if diags else "", diagnostics=diags
                    )
                )
            kernel = spec.kernel
            kernel_line = next((k.line for k in find_kernels(source) if k.name == kernel), 1)
            try:
                cubin, symbols, errors = self._build(source, path, spec.kernels, compile_options)
            except Exception as e:
                return done(KernelCheck(kernel, "error", message=f"compile failed: {e}"))
            if cubin is None:
                return done(
                    KernelCheck(kernel, "compile_error", message=errors[0].message, diagnostics=errors)
                )
            steps, problems = self._steps(spec, source, symbols, _defines(compile_options))
            if problems:
                return done(
                    KernelCheck(kernel, "spec_error", message=problems[0].message, diagnostics=problems)
                )
            blobs = [cubin]
            message: dict[str, Any] = {
                "op": "check",
                "spec": self._spec_desc(spec, spec_source),
                "steps": steps,
                "measure": measure,
                "timing": self.timing.__dict__,
                "device": self.device.to_dict() if self.device else {},
                "runs": max([2] + [len(distributions(a)) for a in spec.args.values() if a.is_input]),
            }
            if reference_outputs_from is not None:
                base_cubin, base_symbols, _base_errors = self._build(
                    reference_outputs_from, path, spec.kernels, compile_options
                )
                base_steps, _ = self._steps(
                    spec, reference_outputs_from, base_symbols, _defines(compile_options)
                )
                if base_cubin is None or not base_steps:
                    return done(KernelCheck(kernel, "error", message="the original kernel does not build"))
                message["baseline_steps"] = base_steps
                blobs.append(base_cubin)
            return done(self._run_check(kernel, spec, message, blobs, on_progress))

    def _run_check(
        self,
        kernel: str,
        spec: Spec,
        message: dict[str, Any],
        blobs: list[bytes],
        on_progress: ProgressFn | None,
    ) -> KernelCheck:
        try:
            reply = self._request(message, blobs, on_progress)
        except WorkerHung as e:
            p = Problem("timeout", e.case, f"kernel {e}")
            return KernelCheck(kernel, "failed", message=p.message, problems=[p], spec_name=spec.title)
        except (WorkerDied, RuntimeError) as e:
            p = Problem("crash", getattr(e, "case", ""), str(e))
            return KernelCheck(kernel, "failed", message=p.message, problems=[p], spec_name=spec.title)
        problems = [Problem(**p) for p in reply.get("problems", [])]
        timings = [
            CaseTiming(
                case=t["case"],
                sizes=t.get("sizes", {}),
                measurement=Measurement.from_dict(t["measurement"]),
                bytes=t.get("bytes", 0.0),
                flops=t.get("flops", 0.0),
                bandwidth_Bps=t.get("bandwidth_Bps", 0.0),
                flops_per_s=t.get("flops_per_s", 0.0),
                roofline=t.get("roofline", 0.0),
                bound=t.get("bound", ""),
                suspicious=t.get("suspicious"),
            )
            for t in reply.get("timings", [])
        ]
        ok = not problems
        return KernelCheck(
            kernel,
            "ok" if ok else "failed",
            ok=ok,
            message="" if ok else problems[0].message,
            problems=problems,
            cases=reply.get("cases", []),
            timings=timings,
            spec_name=spec.title,
        )

    def add_occupancy(
        self,
        check: KernelCheck,
        source: str,
        path: str,
        specs_or_spec_path: SpecArg = None,
        compile_options: Any = None,
        spec_source: str | None = None,
    ) -> KernelCheck:
        """Fill `check.profile` (limiter, speed of light, stalls, hot lines) and `check.occupancy`
        for a check that verified and timed: its largest timed case run once more under ncu
        (seconds; cached per source version). Separate from `check` so that a caller can publish
        the verdict first and never waits on it; the compile comes from the cache."""
        if not (check.ok and check.timings):
            return check
        with self._lock:
            spec, _ = self._resolve_spec(specs_or_spec_path, path, check.kernel, spec_source)
            if spec is None:
                return check
            cubin, symbols, _ = self._build(source, path, spec.kernels, compile_options)
            steps, problems = self._steps(spec, source, symbols, _defines(compile_options))
            if cubin is None or problems:
                return check
            message = {"spec": self._spec_desc(spec, spec_source), "steps": steps}
            self._profile(check, message, cubin, {symbols[k]: k for k in spec.kernels}, path, source)
        return check

    def _profile(
        self,
        check: KernelCheck,
        message: dict[str, Any],
        cubin: bytes,
        symbol_to_kernel: dict[str, str],
        main_path: str,
        main_text: str | None = None,
    ) -> None:
        """Profile of the largest timed case (limiter, stalls, hot lines, achieved occupancy), from a
        one-launch process under ncu; cached per source version (CUBIN, text, steps, case)."""
        ncu = find_ncu()
        if ncu is None:
            check.occupancy_note = "profiling needs Nsight Compute (`ncu`), which is not installed here"
            check.profile = ProfileReport(note=check.occupancy_note)
            return
        timed = check.timings[-1]
        job = {
            "spec": message["spec"],
            "steps": message["steps"],
            "sizes": timed.sizes,
            "case": timed.case,
            "device": self.device_index,
            "fake": self.fake,
        }
        # The file and its text too: the hot lines name them.
        identity = [job, sorted(symbol_to_kernel.items()), main_path, main_text]
        key = hashlib.sha256(cubin + json.dumps(identity, sort_keys=True).encode()).hexdigest()
        report = self._profiles.get(key)
        if report is None:
            report = profile_kernels(ncu, job, cubin, symbol_to_kernel, main_path, main_text=main_text)
            if report.kernels:  # a failed run (timeout, no permission) may go better next time
                self._profiles[key] = report
                while len(self._profiles) > PROFILES_KEPT:
                    self._profiles.pop(next(iter(self._profiles)))
        check.profile = report
        check.occupancy, check.occupancy_note = report.occupancy, "" if report.occupancy else report.note

    def check_compiled(
        self,
        cubin: bytes,
        steps: list[dict[str, Any]],
        spec: Spec,
        measure: bool = True,
        spec_source: str | None = None,
        baseline: tuple[bytes, list[dict[str, Any]]] | None = None,
        profile: bool = False,
    ) -> KernelCheck:
        """Lower level: verify an already built CUBIN with explicit launch steps ([{kernel,
        symbol, params, grid, block, smem}]). Used by tests (and by the fake device)."""
        with self._lock:
            if not self.available:
                return KernelCheck(spec.kernel, "unavailable", message=f"no GPU: {self.reason}")
            message = {
                "op": "check",
                "spec": self._spec_desc(spec, spec_source),
                "steps": steps,
                "measure": measure,
                "timing": self.timing.__dict__,
                "device": self.device.to_dict() if self.device else {},
            }
            blobs = [cubin]
            if baseline:
                message["baseline_steps"] = baseline[1]
                blobs.append(baseline[0])
            check = self._run_check(spec.kernel, spec, message, blobs, None)
            if profile and check.ok and check.timings:
                main = (spec.path or "").removesuffix(".spec.py") + ".cu"
                self._profile(check, message, cubin, {s["symbol"]: s["kernel"] for s in steps}, main)
            return check

    # --- A/B ----------------------------------------------------------------------------------

    def compare(
        self,
        baseline_source: str,
        candidate_source: str,
        path: str,
        kernel: str | None = None,
        compile_options: Any = None,
        specs_or_spec_path: SpecArg = None,
        candidate_compile_options: Any = None,
        min_speedup: float = 1.02,
        spec_source: str | None = None,
        on_progress: ProgressFn | None = None,
    ) -> Comparison:
        """Time baseline and candidate interleaved (A B A B, cold L2) on the spec's timing size and
        bound the speedup with a bootstrap interval. Verify the candidate with check() first;
        here its outputs after timing are checked once more. Never raises."""
        empty = Comparison(1.0, 1.0, 1.0, 0, None, None)
        with self._lock:
            if not self.available:
                return replace(empty, error=f"no GPU: {self.reason}")
            spec, diags = self._resolve_spec(specs_or_spec_path, path, kernel, spec_source)
            if spec is None:
                return replace(empty, error=diags[0].message if diags else "no spec")
            built = []
            for src, opts in (
                (baseline_source, compile_options),
                (candidate_source, candidate_compile_options or compile_options),
            ):
                cubin, symbols, errors = self._build(src, path, spec.kernels, opts)
                if cubin is None:
                    return replace(empty, error=f"does not compile: {errors[0].message}")
                steps, problems = self._steps(spec, src, symbols, _defines(opts))
                if problems:
                    return replace(empty, error=problems[0].message)
                built.append((cubin, steps))
            return self.compare_compiled(built[0], built[1], spec, min_speedup, spec_source, on_progress)

    def compare_compiled(
        self,
        baseline: tuple[bytes, list[dict[str, Any]]],
        candidate: tuple[bytes, list[dict[str, Any]]],
        spec: Spec,
        min_speedup: float = 1.02,
        spec_source: str | None = None,
        on_progress: ProgressFn | None = None,
    ) -> Comparison:
        empty = Comparison(1.0, 1.0, 1.0, 0, None, None)
        with self._lock:
            message = {
                "op": "compare",
                "spec": self._spec_desc(spec, spec_source),
                "steps_a": baseline[1],
                "steps_b": candidate[1],
                "timing": self.timing.__dict__,
                "device": self.device.to_dict() if self.device else {},
            }
            try:
                reply = self._request(message, [baseline[0], candidate[0]], on_progress)
            except (WorkerHung, WorkerDied, RuntimeError) as e:
                return replace(empty, error=str(e))
            problems = [Problem(**p) for p in reply.get("problems", [])]
            if not reply.get("cases"):
                return replace(
                    empty, problems=problems, error=problems[0].message if problems else "no timing case"
                )
            case = reply["cases"][-1]  # the largest timing size
            a, b = case["a"], case["b"]
            speedup, low, high = bootstrap_ratio(a, b)
            name = self.device.name if self.device else ""
            suspicious = case.get("suspicious")
            return Comparison(
                speedup=speedup,
                ci_low=low,
                ci_high=high,
                n=min(len(a), len(b)),
                baseline=summarize(a, self.timing.cold_l2, name, case["case"]),
                candidate=summarize(b, self.timing.cold_l2, name, case["case"]),
                case=case["case"],
                faster=low > min_speedup and not suspicious and not problems,
                suspicious=suspicious,
                problems=problems,
            )


def check_file(
    session: GpuSession,
    cu_path: str,
    source: str | None = None,
    compile_options: Any = None,
    measure: bool = True,
    spec_source: str | None = None,
    on_progress: ProgressFn | None = None,
) -> list[KernelCheck]:
    """Check every kernel of a .cu that its sidecar spec describes (the CLI's and server's entry)."""
    if source is None:
        with open(cu_path, encoding="utf-8") as f:
            source = f.read()
    spec_path = spec_path_for(cu_path)
    if spec_source is None and not os.path.exists(spec_path):
        return []
    loaded = load_specs(spec_path, spec_source)
    if not loaded.ok:
        first = next(d for d in loaded.diagnostics if d.severity is Severity.ERROR)
        return [KernelCheck("", "spec_error", message=first.message, diagnostics=loaded.diagnostics)]
    return [
        session.check(
            source,
            cu_path,
            loaded,
            s.kernel,
            compile_options,
            measure,
            spec_source=spec_source,
            on_progress=on_progress,
        )
        for s in loaded.specs
    ]
