"""The GPU client the server, the CLI and the optimizer use: GpuSession.

The data takes one road: source → kernel_lsp.compile (for the device's exact arch) → compiled
artifact (CompileResult) → spec resolution (kernel_lsp.evaluation.specs: launch steps, entry
symbols) → an evaluation backend (kernel_lsp.evaluation: `local` = a worker process on one GPU)
→ plain dataclasses. GpuSession ties these together for callers; it never imports CUDA driver
APIs, and its backend restarts a worker after a hang or a crash.

    with GpuSession() as gpu:
        if gpu.available:
            built = compile_source(source, "vadd.cu", gpu.compile_options_for_device(options))
            request = GpuCheckRequest(source, "vadd.cu", kernel="vadd", spec="vadd.spec.py", artifact=built)
            check = gpu.check(request)
            print(check.ok, check.message, check.headline)

Without a GPU (no driver, no device, CUDA_VISIBLE_DEVICES empty) `available` is False and
`reason` says why; nothing raises.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from typing import Any

from kernel_lsp.compile.shared_lib import LibraryBuild, compile_library
from kernel_lsp.evaluation.backend import Built, EvaluationBackend
from kernel_lsp.evaluation.local import LocalBackend, fake_gpu_default, local_gpu_absence
from kernel_lsp.evaluation.specs import (
    GPU_SOURCE,
    SpecArg,
    entry_steps,
    entry_symbols,
    launch_steps,
    resolve_spec,
    spec_desc,
)
from kernel_lsp.evaluation.worker_process import ProgressFn, WorkerDied, WorkerHung, WorkerProcess
from kernel_lsp.files import read_text_file
from kernel_lsp.gpu_reports import GPU_OFF_IN_EDITOR, ProfileReport, SanitizerReport, no_gpu_message
from kernel_lsp.gpu_reports import TOOLS as SANITIZER_TOOLS
from kernel_lsp.gpu_request import Artifact, GpuCheckRequest, GpuCompareRequest
from kernel_lsp.gpu_results import CaseTiming, Comparison, KernelCheck
from kernel_lsp.host_entry import find_host_function
from kernel_lsp.model import CheckStatus, CompileResult, Diagnostic, Severity, TimingSettings
from kernel_lsp.runner.hardware import DeviceInfo
from kernel_lsp.runner.profile import find_ncu
from kernel_lsp.runner.sanitizer import find_sanitizer, smallest_case
from kernel_lsp.source import find_kernel, find_kernels
from kernel_lsp.spec import Spec, case_label, spec_path_for
from kernel_lsp.spec.isolated import load_specs_isolated

__all__ = [
    "GPU_OFF_IN_EDITOR",
    "GPU_SOURCE",
    "CaseTiming",
    "Comparison",
    "GpuCheckRequest",
    "GpuCompareRequest",
    "GpuSession",
    "KernelCheck",
    "ProgressFn",
    "SpecArg",
    "WorkerDied",
    "WorkerHung",
    "WorkerProcess",
    "check_file",
    "entry_symbols",
    "local_gpu_absence",
    "no_gpu_message",
]

PROFILES_KEPT = 64  # profiles of recent source versions, a few KB each


def _defines(options: Any) -> tuple[str, ...]:
    return tuple(getattr(options, "defines", ()) or ())


def _kernel_line(source: str, kernel: str | None) -> int:
    """The line of the kernel, or of the host function an entry spec names."""
    sig = find_kernel(find_kernels(source), kernel) if kernel else None
    if sig is None and kernel:
        entry = find_host_function(source, kernel)
        return entry.line if entry else 1
    return sig.line if sig else 1


class GpuSession:
    """Spec resolution and checking over one evaluation backend (one GPU). Thread-safe: the
    backend serialises its requests."""

    def __init__(
        self,
        device: int | None = None,
        launch_timeout_s: float = 5.0,
        timing: TimingSettings | None = None,
        fake: bool | None = None,
        start_timeout_s: float = 60.0,
        use_device_cache: bool = True,
        backend: EvaluationBackend | None = None,
        sandboxed: bool = False,
    ):
        """`sandboxed`: the worker runs confined (kernel_lsp/fence/sandbox.py): what the
        optimizer uses for candidates whose host code an LLM wrote; such code is refused by a
        worker that is not."""
        self.backend: Any = backend or LocalBackend(
            device, launch_timeout_s, timing, fake, start_timeout_s, use_device_cache, sandboxed
        )
        # One profile per source version (CUBIN, text, launch steps, timed case).
        self._profiles: dict[str, ProfileReport] = {}

    # The worker's spec description (kept here too: profiling code and its tests build messages).
    _spec_desc = staticmethod(spec_desc)

    # --- lifecycle and the device (the backend's) ------------------------------------------------

    def __enter__(self) -> GpuSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()

    @property
    def available(self) -> bool:
        return bool(self.backend.available)

    @property
    def reason(self) -> str:
        """Why `available` is False ("" when it is True)."""
        return str(self.backend.reason)

    @property
    def device(self) -> DeviceInfo | None:
        return self.backend.device

    @property
    def device_index(self) -> int:
        return int(self.backend.device_index)

    @property
    def host(self) -> str:
        return str(self.backend.host)

    @property
    def fake(self) -> bool:
        return bool(getattr(self.backend, "fake", fake_gpu_default()))

    @property
    def timing(self) -> TimingSettings:
        return self.backend.timing

    @property
    def restarts(self) -> int:
        return int(getattr(self.backend, "restarts", 0))

    @property
    def worker_pid(self) -> int | None:
        return getattr(self.backend, "worker_pid", None)

    # --- compiling happens before: the device's options, and the artifact -----------------------

    def compile_options_for_device(self, options: Any) -> Any:
        """The options with the device's exact arch (keeping an `a` variant such as sm_90a)."""
        from kernel_lsp.compile import CompileOptions

        options = options or CompileOptions()
        dev = self.device
        if dev is None:
            return options
        return options.with_arch(dev.arch)

    def compile(self, source: str, path: str, options: Any = None) -> CompileResult:
        """compile_source (in a worker process) for this device's exact arch: what check and compare take."""
        from kernel_lsp.compile import compile_isolated

        return compile_isolated(source, path, self.compile_options_for_device(options))

    def build_library(
        self, source: str, path: str, options: Any = None, candidate_of: str | None = None
    ) -> LibraryBuild:
        """The file as a shared library for this device's exact arch (host-entry specs).
        `candidate_of`: the original's text when `source` is a candidate an LLM wrote: the fence
        checks it (LibraryBuild.fence) and it runs only in a sandboxed session."""
        from kernel_lsp.compile import CompileOptions

        return build_library(
            source, path, self.compile_options_for_device(options or CompileOptions()), candidate_of
        )

    def sandboxed_session(self) -> GpuSession | None:
        """A session over the same GPU whose worker is a judge, for code an LLM wrote (this one
        where it already is): each candidate runs in a confined process of its own; on Ray, in
        the judge of the same actor. None where the backend has no judge."""
        backend = self.backend
        twin = getattr(backend, "judged_twin", None)
        if twin is not None:
            return GpuSession(backend=twin())
        if not isinstance(backend, LocalBackend):
            return None
        if backend.sandboxed:
            return self
        return GpuSession(backend=backend.like(sandboxed=True, lanes=1))

    def _built_entry(
        self, source: str, path: str, spec: Spec, artifact: Artifact
    ) -> tuple[Built | None, list[Diagnostic]]:
        """(library, the entry's step) for an entry spec: `artifact` is a LibraryBuild, or
        compile options (None: the defaults) to build one with."""
        if isinstance(artifact, CompileResult):
            message = "an entry spec runs a shared library: pass compile options or GpuSession.build_library's result"
            return None, [Diagnostic(path, 1, 1, Severity.ERROR, message, source=GPU_SOURCE)]
        build = artifact if isinstance(artifact, LibraryBuild) else self.build_library(source, path, artifact)
        if not build.ok:
            errors = [d for d in build.diagnostics if d.severity is Severity.ERROR]
            return None, errors or [Diagnostic(path, 1, 1, Severity.ERROR, "build failed", source=GPU_SOURCE)]
        dev = self.device
        if dev is not None and build.result.arch.rstrip("af") != dev.arch:
            message = f"built for {build.result.arch}, but {dev.name} is {dev.arch}: build with GpuSession.build_library"
            return None, [Diagnostic(path, 1, 1, Severity.ERROR, message, source=GPU_SOURCE)]
        steps, problems = entry_steps(spec, source, build)
        if problems:
            return None, problems
        assert build.library is not None
        return (build.library, steps), []

    def _built(
        self, source: str, path: str, spec: Spec, artifact: Artifact, defines: tuple[str, ...] | None
    ) -> tuple[Built | None, list[Diagnostic]]:
        """(CUBIN, launch steps) from the artifact, or the diagnostics that prevent them. The
        launch lines see `defines` (default: those of compile options passed as the artifact).
        An entry spec: (shared library, its call) instead."""
        if spec.is_entry:
            return self._built_entry(source, path, spec, artifact)
        if not isinstance(artifact, CompileResult):
            defines = _defines(artifact) if defines is None else defines
            artifact = self.compile(source, path, artifact)
        if not artifact.ok or artifact.cubin is None:
            errors = [d for d in artifact.diagnostics if d.severity is Severity.ERROR]
            return None, errors or [
                Diagnostic(path, 1, 1, Severity.ERROR, "compile failed", source=GPU_SOURCE)
            ]
        dev = self.device
        if dev is not None and artifact.arch.rstrip("af") != dev.arch:
            message = (
                f"compiled for {artifact.arch}, but {dev.name} is {dev.arch}: compile with "
                "the device's options (GpuSession.compile)"
            )
            return None, [Diagnostic(path, 1, 1, Severity.ERROR, message, source=GPU_SOURCE)]
        steps, problems = launch_steps(spec, source, artifact, defines or ())
        if problems:
            return None, problems
        return (artifact.cubin, steps), []

    # --- checking -------------------------------------------------------------------------------

    def check(self, request: GpuCheckRequest, on_progress: ProgressFn | None = None) -> KernelCheck:
        """Verify `request.kernel` of `request.artifact` against its spec (and, with
        `request.reference`, against the outputs of the original's kernel on the same inputs),
        then time it unless `request.measure` is False. `on_progress` hears the worker's progress
        (not part of the request: it is the caller's, not what is checked). Never raises.
        Achieved occupancy comes after, from `add_occupancy`."""
        start = time.perf_counter()
        source, path, kernel, artifact = request.source, request.path, request.kernel, request.artifact
        spec_source, defines, reference = request.spec_source, request.defines, request.reference
        kernel_line = _kernel_line(source, kernel)
        entry = False

        def done(check: KernelCheck) -> KernelCheck:
            check.duration_s = time.perf_counter() - start
            check.entry = entry
            check.device = check.device or (self.backend.device if self.available else None)
            check.host, check.device_index = check.host or self.host, self.device_index
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

        if not self.available:
            return done(
                KernelCheck(kernel or "", CheckStatus.UNAVAILABLE, message=no_gpu_message(self.reason))
            )
        spec, diags = resolve_spec(request.spec, path, kernel, spec_source)
        if spec is None:
            status = (
                CheckStatus.SPEC_ERROR
                if any(d.severity is Severity.ERROR for d in diags)
                else CheckStatus.NO_SPEC
            )
            return done(
                KernelCheck(
                    kernel or "", status, message=diags[0].message if diags else "", diagnostics=diags
                )
            )
        kernel = spec.kernel
        kernel_line = _kernel_line(source, kernel)
        entry = spec.is_entry
        try:
            built, problems = self._built(source, path, spec, artifact, defines)
        except Exception as e:
            return done(KernelCheck(kernel, CheckStatus.ERROR, message=f"compile failed: {e}"))
        if built is None:
            status = CheckStatus.SPEC_ERROR if _in_spec(problems, spec) else CheckStatus.COMPILE_ERROR
            if any((d.code or "").startswith("fence-") for d in problems):
                status = CheckStatus.FENCED  # host code an LLM wrote that may not run
            return done(KernelCheck(kernel, status, message=problems[0].message, diagnostics=problems))
        baseline = None
        if reference is None and spec.is_entry and spec.baseline:
            baseline, problems = self._entry_baseline(spec, path, artifact)
            if baseline is None:
                return done(
                    KernelCheck(
                        kernel, CheckStatus.SPEC_ERROR, message=problems[0].message, diagnostics=problems
                    )
                )
        if reference is not None:
            ref_source, ref_artifact = (
                reference
                if isinstance(reference, tuple)
                else (reference, artifact if not isinstance(artifact, CompileResult) else None)
            )
            baseline, _ = self._built(ref_source, path, spec, ref_artifact, defines)
            if baseline is None:
                return done(
                    KernelCheck(kernel, CheckStatus.ERROR, message="the original kernel does not build")
                )
        asked = time.perf_counter()
        check = self.backend.check(spec, spec_source, built, request.measure, baseline, on_progress)
        if check.phases:
            request_s = time.perf_counter() - asked
            check.phases = {
                "prepare": asked - start,
                **check.phases,
                "transfer": max(
                    0.0, request_s - sum(v for k, v in check.phases.items() if not k.startswith("of which"))
                ),
            }
        return done(check)

    def _entry_baseline(
        self, spec: Spec, path: str, artifact: Artifact
    ) -> tuple[Built | None, list[Diagnostic]]:
        """The spec's baseline file (the user's own original) built like the file it checks."""
        baseline_path = spec.baseline_path() or ""
        try:
            text = read_text_file(baseline_path)  # regular, bounded, never blocking on a FIFO
        except OSError as e:
            message = f"baseline {spec.baseline}: {e}"
            return None, [
                Diagnostic(spec.path or path, spec.line or 1, 1, Severity.ERROR, message, source=GPU_SOURCE)
            ]
        options = artifact.options if isinstance(artifact, LibraryBuild) else artifact
        built, problems = self._built_entry(
            text, baseline_path, spec, self.build_library(text, baseline_path, options)
        )
        if built is None:
            first = problems[0].message if problems else "does not build"
            message = f"baseline {spec.baseline}: {first}"
            return None, [
                Diagnostic(spec.path or path, spec.line or 1, 1, Severity.ERROR, message, source=GPU_SOURCE)
            ]
        return built, []

    def prove(self, request: GpuCheckRequest, tools: tuple[str, ...] = SANITIZER_TOOLS) -> SanitizerReport:
        """Proof before an offer: the spec's smallest non-trivial case of `request` launched once
        under each compute-sanitizer tool in `tools`; a finding (`report.blocks_offer`) blocks the
        offer, with the sanitizer's message at the source line. The same request as `check`'s, so
        the gate runs what was verified: `request.measure` and `request.reference` are ignored
        here (one untimed launch, and no outputs compared). Without compute-sanitizer the gate is
        skipped and `report.note` says so. Never raises."""
        sanitizer = find_sanitizer()
        if sanitizer is None:
            return SanitizerReport(note="compute-sanitizer is not installed here: the proof gate was skipped")
        run = getattr(self.backend, "sanitize", None)
        if run is None or not self.available:
            why = "this evaluation backend runs no sanitizer" if run is None else no_gpu_message(self.reason)
            return SanitizerReport(note=f"the proof gate was skipped: {why}")
        spec, diags = resolve_spec(request.spec, request.path, request.kernel, request.spec_source)
        if spec is None:
            return SanitizerReport(note=diags[0].message if diags else "no spec")
        built, problems = self._built(request.source, request.path, spec, request.artifact, request.defines)
        if built is None:
            return SanitizerReport(note=f"does not build: {problems[0].message if problems else '?'}")
        sizes = smallest_case(spec.sizes)
        job = {
            "spec": spec_desc(spec, request.spec_source),
            "steps": built[1],
            "sizes": sizes,
            "case": case_label(sizes),
        }
        return run(sanitizer, job, built[0], tools)

    def add_occupancy(self, check: KernelCheck, request: GpuCheckRequest) -> KernelCheck:
        """Fill `check.profile` (limiter, speed of light, stalls, hot lines) and `check.occupancy`
        for a check that verified and timed: its largest timed case run once more under ncu
        (seconds; cached per source version). Separate from `check` so that a caller can publish
        the verdict first and never waits on it; pass the request `check` ran (its artifact:
        options or None are compiled, from the cache; its kernel is `check.kernel`)."""
        if not (check.ok and check.timings):
            return check
        spec, _ = resolve_spec(request.spec, request.path, check.kernel, request.spec_source)
        if spec is None:
            return check
        built, _ = self._built(request.source, request.path, spec, request.artifact, request.defines)
        if built is None:
            return check
        cubin, steps = built
        message = {"spec": spec_desc(spec, request.spec_source), "steps": steps}
        self._profile(check, message, cubin, symbol_names(steps), request.path, request.source)
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
            report = self.backend.profile(ncu, job, cubin, symbol_to_kernel, main_path, main_text)
            if report.kernels:  # a failed run (timeout, no permission) may go better next time
                self._profiles[key] = report
                while len(self._profiles) > PROFILES_KEPT:
                    self._profiles.pop(next(iter(self._profiles)))
        check.profile = report
        check.occupancy, check.occupancy_note = report.occupancy, "" if report.occupancy else report.note
        if not check.occupancy and not check.occupancy_note:  # never an occupancy line missing unsaid
            missing = ", ".join(report.missing)
            check.occupancy_note = "ncu reported no achieved occupancy" + (
                f" (missing: {missing})" if missing else ""
            )

    def check_compiled(
        self,
        cubin: bytes,
        steps: list[dict[str, Any]],
        spec: Spec,
        measure: bool = True,
        spec_source: str | None = None,
        baseline: Built | None = None,
        profile: bool = False,
    ) -> KernelCheck:
        """Lower level: verify an already built CUBIN with explicit launch steps ([{kernel,
        symbol, params, grid, block, smem}]). Used by tests (and by the fake device)."""
        check = self.backend.check(spec, spec_source, (cubin, steps), measure, baseline, None)
        if profile and check.ok and check.timings:
            message = {"spec": spec_desc(spec, spec_source), "steps": steps}
            main = (spec.path or "").removesuffix(".spec.py") + ".cu"
            self._profile(check, message, cubin, symbol_names(steps), main)
        return check

    # --- A/B ------------------------------------------------------------------------------------

    def compare(self, request: GpuCompareRequest, on_progress: ProgressFn | None = None) -> Comparison:
        """Time baseline and candidate interleaved (A B A B, cold L2) on the spec's timing size, on
        this one device, and bound the speedup with a bootstrap interval. Verify the candidate with
        check() first; here its outputs after timing are checked once more. Never raises."""
        empty = Comparison(1.0, 1.0, 1.0, 0, None, None, host=self.host, device_index=self.device_index)
        if not self.available:
            return replace(empty, error=no_gpu_message(self.reason))
        spec_source = request.spec_source
        spec, diags = resolve_spec(request.spec, request.path, request.kernel, spec_source)
        if spec is None:
            return replace(empty, error=diags[0].message if diags else "no spec")
        baseline_artifact, candidate_artifact = request.baseline_artifact, request.candidate_artifact
        if candidate_artifact is None and isinstance(baseline_artifact, LibraryBuild):
            candidate_artifact = baseline_artifact.options  # the same compile options for both
        elif candidate_artifact is None and not isinstance(baseline_artifact, CompileResult):
            candidate_artifact = baseline_artifact  # the same compile options for both
        built = []
        for src, art in ((request.baseline, baseline_artifact), (request.candidate, candidate_artifact)):
            b, problems = self._built(src, request.path, spec, art, request.defines)
            if b is None:
                message = problems[0].message if problems else "compile failed"
                return replace(
                    empty, error=message if _in_spec(problems, spec) else f"does not compile: {message}"
                )
            built.append(b)
        return self.backend.compare(spec, spec_source, built[0], built[1], request.min_speedup, on_progress)

    def compare_compiled(
        self,
        baseline: Built,
        candidate: Built,
        spec: Spec,
        min_speedup: float = 1.02,
        spec_source: str | None = None,
        on_progress: ProgressFn | None = None,
    ) -> Comparison:
        return self.backend.compare(spec, spec_source, baseline, candidate, min_speedup, on_progress)


def build_library(source: str, path: str, options: Any, candidate_of: str | None = None) -> LibraryBuild:
    """`source` as a shared library with these exact options (their arch), built in the shared
    compile worker like every compile of the GPU and optimizer paths; `candidate_of` as in
    GpuSession.build_library. Never raises."""
    from kernel_lsp.compile.pool import WorkerFailed, run_isolated

    try:
        return run_isolated(_build_library, source, path, options, candidate_of)
    except WorkerFailed as e:
        message = f"building {os.path.basename(path)} for {options.arch}: {e}"
        diagnostic = Diagnostic(path, 1, 1, Severity.ERROR, message, code=e.reason)
        return LibraryBuild(
            CompileResult(path, options.arch, False, [diagnostic]), trusted=candidate_of is None
        )


def _build_library(source: str, path: str, options: Any, candidate_of: str | None) -> LibraryBuild:
    """compile_library with the fence (run in the shared worker process)."""
    from kernel_lsp import fence

    return compile_library(source, path, options, candidate_of, fence=fence)


def symbol_names(steps: list[dict[str, Any]]) -> dict[str, str]:
    """{entry symbol: the name a user knows} of the kernels a run launches: the pipeline's, or
    for a host entry every kernel its library holds (the profile times each one it launched)."""
    names: dict[str, str] = {}
    for s in steps:
        if s.get("kind") == "entry":
            names.update(s.get("kernels") or {})
        else:
            names[s["symbol"]] = s["kernel"]
    return names


def _in_spec(problems: list[Diagnostic], spec: Spec) -> bool:
    return bool(problems) and bool(spec.path) and problems[0].path == spec.path


def check_file(
    session: GpuSession,
    cu_path: str,
    source: str | None = None,
    compile_options: Any = None,
    measure: bool = True,
    spec_source: str | None = None,
    on_progress: ProgressFn | None = None,
    artifact: CompileResult | None = None,
    library: LibraryBuild | None = None,
) -> list[KernelCheck]:
    """Check every kernel of a .cu that its sidecar spec describes (the CLI's and server's entry):
    compiled once for the device (or `artifact`, already compiled for it; `library`, the shared
    library of its entry specs, already built for it), then each kernel."""
    if source is None:
        source = read_text_file(cu_path)
    spec_path = spec_path_for(cu_path)
    if spec_source is None and not os.path.exists(spec_path):
        return []
    loaded = load_specs_isolated(spec_path, spec_source)
    if not loaded.ok:
        first = next(d for d in loaded.diagnostics if d.severity is Severity.ERROR)
        return [
            KernelCheck("", CheckStatus.SPEC_ERROR, message=first.message, diagnostics=loaded.diagnostics)
        ]
    if artifact is None and session.available and any(not s.is_entry for s in loaded.specs):
        artifact = session.compile(source, cu_path, compile_options)
    if library is None and session.available and any(s.is_entry for s in loaded.specs):
        library = session.build_library(source, cu_path, compile_options)
    return [
        session.check(
            GpuCheckRequest(
                source,
                cu_path,
                kernel=s.kernel,
                spec=loaded,
                spec_source=spec_source,
                artifact=library if s.is_entry else artifact,
                defines=_defines(compile_options),
                measure=measure,
            ),
            on_progress=on_progress,
        )
        for s in loaded.specs
    ]
