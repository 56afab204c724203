"""GPU verification for `kernel-lsp --check`: every file that compiled and has a spec sidecar is
compiled for the device, verified and timed on the GPU (through the Workspace); the findings join
the file's diagnostics. With several GPUs (`--gpus all|N`, `gpu.devices`) the files are spread over
them, one session per GPU (a local GPU or a Ray actor's, `evaluation.backend`), and each progress
line says which GPU did the file."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from .check import FileCheck
from .evaluation.pool import BackendPool
from .gpu import GpuSession, no_gpu_message
from .spec import spec_path_for
from .workspace import Workspace, gpu_label


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def verify_file(
    workspace: Workspace, gpu: GpuSession, c: FileCheck, profile: bool = False, prebuilt: Any = None
) -> None:
    """Compile `c`'s file for this GPU, check every spec'd kernel, add the findings to `c`.
    `prebuilt` (check_jobs.Prebuilt): the compile its check worker made for this GPU's arch,
    used when the file's text and the device's options are still the ones it compiled."""
    verification = workspace.verify(gpu, c.path, prebuilt=prebuilt)
    if verification.artifact is None:  # gone or changed since the compile check
        return
    c.gpu_checks = verification.checks
    if profile:
        workspace.profile(gpu, verification)
    for k in c.gpu_checks:
        c.diagnostics.extend(k.diagnostics)


def awaiting_gpu(checks: list[FileCheck]) -> list[FileCheck]:
    """The files whose spec'd kernels a GPU would verify: compiled cleanly and have a spec."""
    return [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]


def mark_unverified(checks: list[FileCheck], reason: str) -> None:
    """Say on each file that has a spec that its kernels were not verified, and why, so that a
    compile-only run is never mistaken for a verified one."""
    for c in awaiting_gpu(checks):
        c.unverified = reason


def verify_checks(
    checks: list[FileCheck],
    workspace: Workspace,
    log=print,
    profile: bool = False,
    gpus: str | None = None,
    progress=_stderr,
) -> str | None:
    """Verify in place; returns the device description, or None with the reason logged (and
    kept on each file that went unverified)."""
    todo = awaiting_gpu(checks)
    if not todo:
        return None
    sessions, reason = workspace.open_gpus(gpus, log)
    if not sessions:
        log(f"kernel-lsp: GPU verification skipped: {no_gpu_message(reason)}")
        mark_unverified(todo, no_gpu_message(reason))
        return None
    pool = BackendPool(sessions)
    try:

        def verify(gpu: GpuSession, c: FileCheck) -> None:
            verify_file(workspace, gpu, c, profile)

        def done(c: FileCheck, _result: None, gpu: GpuSession) -> None:
            if len(pool) > 1:
                verdicts = ", ".join(f"{k.kernel or '?'} {k.status}" for k in c.gpu_checks) or "no kernels"
                progress(f"kernel-lsp: {gpu_label(gpu)}: {os.path.relpath(c.path)}: {verdicts}")

        pool.map(verify, todo, done)
        names = sorted({s.device.name for s in sessions if s.device})
        if not names:
            return None
        return names[0] if len(sessions) == 1 else f"{len(sessions)} GPUs ({', '.join(names)})"
    finally:
        pool.close()


# --- a whole run, streamed: the compile checks and the GPU verification in one pipeline ---------


@dataclass
class FileDone:
    """One file finished (its compile check, and its GPU verification where it had one):
    `done` of `total` files so far; `gpu` the label of the GPU that verified it ("" none)."""

    check: FileCheck
    index: int
    done: int
    total: int
    gpu: str = ""
    verify_s: float = 0.0


@dataclass
class GpuPlan:
    """How a run verifies: `gpus` (`--gpus`, None: every visible GPU on this machine, the
    setting's on Ray), `may_verify(path)` (False: its spec is only read), the ncu `profile`,
    and `log` for the one-off lines (GPU skipped, a device that did not answer)."""

    gpus: str | None = None
    may_verify: Callable[[str], bool] = lambda _path: True
    profile: bool = False
    log: Callable[[str], None] = _stderr
    arch: str | None = None  # the GPU's arch when known before the GPUs open (to prebuild for)
    # Files verified at once on each local GPU, each in a worker process of its own (timed
    # launches still have the GPU alone: runner/turns.py). None: `check_lanes()`'s choice.
    lanes: int | None = None
    device: str | None = field(default=None, init=False)  # what verified, once known


MAX_LANES = 4  # worker processes per GPU at most (each holds a CUDA context and its case's arrays)
CPUS_PER_LANE = 4  # a lane's worker makes inputs and references in threads of its own


def check_lanes(gpus: int, fake: bool, profile: bool = False) -> int:
    """Worker processes per GPU for `check`: KERNEL_LSP_CHECK_LANES when set; else, on a real GPU,
    as many as the CPUs allow (CPUS_PER_LANE each, MAX_LANES at most): verifying a kernel is
    mostly the host's work (inputs, numpy references, comparisons: a H200 run spent under 5% of
    a kernel's seconds in timed launches). One with ncu (`profile`: its replays want the GPU
    alone) and on the fake GPU (its runs are the host's: lanes would only share its CPUs)."""
    forced = os.environ.get("KERNEL_LSP_CHECK_LANES", "").strip()
    if forced.isdigit() and int(forced) > 0:
        return min(int(forced), 16)
    if profile or fake:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_LANES, cpus // (CPUS_PER_LANE * max(1, gpus))))


class _Verifier:
    """Opens the GPUs when the first file needs one, and verifies each file on whichever is
    free (one worker process per GPU, kept across files)."""

    def __init__(self, workspace: Workspace, plan: GpuPlan):
        self.workspace, self.plan = workspace, plan
        self._lock = threading.Lock()
        self._pool: BackendPool | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.reason: str | None = None  # why nothing is verified (no GPU answered)
        self._lanes_opening: threading.Thread | None = None
        self._closing = False

    def _open(self) -> None:
        from .evaluation.local import fake_gpu_default
        from .evaluation.pool import parse_gpus

        wanted = len(parse_gpus(self.plan.gpus)[0])
        lanes = self.plan.lanes or check_lanes(wanted, fake_gpu_default(), self.plan.profile)
        sessions, reason = self.workspace.open_gpus(self.plan.gpus, self.plan.log, lanes=lanes)
        if not sessions:
            self.reason = no_gpu_message(reason)
            self.plan.log(f"kernel-lsp: GPU verification skipped: {self.reason}")
            return
        self._pool = BackendPool(sessions)
        self._executor = ThreadPoolExecutor(len(sessions) * lanes, thread_name_prefix="kernel-lsp-gpu")
        names = sorted({s.device.name for s in sessions if s.device})
        if names:
            many = f"{len(sessions)} GPUs ({', '.join(names)})"
            self.plan.device = names[0] if len(sessions) == 1 else many
        if lanes > 1:  # the first lane of each GPU verifies already while the others start
            self._lanes_opening = threading.Thread(
                target=self._open_lanes, args=(sessions, lanes), name="kernel-lsp-lanes", daemon=True
            )
            self._lanes_opening.start()

    def _open_lanes(self, sessions: list[GpuSession], lanes: int) -> None:
        """Lanes 2.. of each local GPU (a worker process each), added to the pool as each
        answers, GPU after GPU in turn (so that each GPU gets its second lane before any gets its
        third). A Ray actor's GPU keeps its one."""
        from .evaluation.local import LocalBackend

        local = [s.backend for s in sessions if isinstance(s.backend, LocalBackend)]
        for _ in range(lanes - 1):
            for b in local:
                if self._closing:
                    return
                lane = GpuSession(backend=b.like(lanes=lanes))
                answered = lane.available  # its worker started (outside the lock: seconds)
                with self._lock:
                    if self._closing or not answered or self._pool is None:
                        lane.close()
                        continue
                    self._pool.add(lane)

    @property
    def gpus(self) -> int:
        return len(self._pool) if self._pool is not None else 0

    def submit(self, c: FileCheck, prebuilt: Any) -> Future | None:
        """The file's verification, started on the next free GPU; None when there is none
        (the file is marked unverified)."""
        with self._lock:
            if self._pool is None and self.reason is None:
                self._open()
        if self._pool is None or self._executor is None:
            mark_unverified([c], self.reason or "no GPU")
            return None
        pool = self._pool

        def run() -> tuple[str, float]:
            def one(gpu: GpuSession) -> tuple[str, float]:
                start = time.perf_counter()
                verify_file(self.workspace, gpu, c, self.plan.profile, prebuilt)
                return gpu_label(gpu), time.perf_counter() - start

            return pool.run(one)

        return self._executor.submit(run)

    def close(self) -> None:
        self._closing = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._lanes_opening is not None:
            self._lanes_opening.join()
        if self._pool is not None:
            self._pool.close()


def check_and_verify(
    workspace: Workspace,
    files: list[str],
    jobs: int,
    plan: GpuPlan | None = None,
    on_file: Callable[[FileDone], None] | None = None,
) -> list[FileCheck]:
    """Check `files` (compile, findings, resources: `jobs` worker processes) and, with a `plan`,
    verify each spec'd file on the GPUs as soon as its compile check is done, while the others
    still compile. `on_file` is called (from one thread at a time) as each file is finished.
    Returns the checks in the order of `files`. Raises RayUnavailable when Ray was asked for
    and cannot serve, RuntimeError when the engine itself failed on a file."""
    from .scheduler import CheckScheduler

    checks: list[FileCheck | None] = [None] * len(files)
    done = 0
    report_lock = threading.Lock()

    def finished(i: int, c: FileCheck, gpu: str = "", seconds: float = 0.0) -> None:
        nonlocal done
        with report_lock:
            checks[i] = c
            done += 1
            if on_file is not None:
                on_file(FileDone(c, i, done, len(files), gpu, seconds))

    if not files:
        return []
    # Its workers are forked when the first check is submitted, before any thread of the
    # verifier's starts (none is copied into them).
    scheduler = CheckScheduler(min(jobs, len(files)))
    verifier = _Verifier(workspace, plan) if plan is not None else None
    pending: list[Future] = []
    try:
        requests = workspace.file_requests(files, plan.arch if plan else None)
        submitted = {scheduler.check_and_build(r, workspace): i for i, r in enumerate(requests)}
        for future in as_completed(submitted):
            i = submitted[future]
            c, prebuilt = future.result()  # an engine error (RuntimeError) surfaces here
            if verifier is None or not awaiting_gpu([c]) or not plan.may_verify(files[i]):  # type: ignore[union-attr]
                finished(i, c)
                continue
            verifying = verifier.submit(c, prebuilt)
            if verifying is None:
                finished(i, c)
                continue

            def done_verifying(f: Future[Any], i: int = i, c: FileCheck = c) -> None:
                finished(i, c, *(f.result() if f.exception() is None else ("", 0.0)))

            verifying.add_done_callback(done_verifying)
            pending.append(verifying)
        scheduler.close()  # every file is checked: its workers need not wait for the GPUs
        for f in pending:
            f.result()  # an engine error in a verification surfaces here
    finally:
        scheduler.close()
        if verifier is not None:
            verifier.close()
    return [c for c in checks if c is not None]


def expected_arch() -> str | None:
    """The arch of this machine's first GPU, known before any GPU worker starts (nvidia-smi), so
    that the check workers can compile spec'd files for it (None: unknown; the fake GPU, which
    loads no real CUBIN: its callers' own compile runs in the GPU phase, as before)."""
    from .compile import local_gpu_arch

    return local_gpu_arch()


def kernel_seconds(k: Any) -> str:
    """`4.21 s: inputs+reference 2.03, verify 0.61, ...`: a kernel's verification time and the
    phases it went to (the larger ones, in the order they ran)."""
    total = float(getattr(k, "duration_s", 0.0) or 0.0)
    phases = getattr(k, "phases", None) or {}
    shown = [f"{name} {s:.2f}" for name, s in phases.items() if s >= 0.005]
    return f"{total:.2f} s" + (f": {', '.join(shown)}" if shown else "")


def file_line(d: FileDone) -> str:
    """`-v`'s line for a finished file: `[7/39] dot/dot_bf16.cu: GPU 1: dot ok (4.21 s: inputs+reference
    2.03, verify 0.61, ...)`, or its
    compile findings when nothing ran on a GPU."""
    head = f"kernel-lsp: [{d.done}/{d.total}] {os.path.relpath(d.check.path)}"
    c = d.check
    if c.gpu_checks:
        kernels = ", ".join(f"{k.kernel or '?'} {k.status} ({kernel_seconds(k)})" for k in c.gpu_checks)
        return f"{head}: {d.gpu}: {kernels}" if d.gpu else f"{head}: {kernels}"
    if not c.checked:
        return f"{head}: not checked"
    found = f"{c.errors} error(s), {c.warnings} warning(s), {len(c.kernels)} kernel(s)"
    return f"{head}: {found}" + (f"; not verified: {c.unverified}" if c.unverified else "")
