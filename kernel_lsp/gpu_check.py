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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .check import FileCheck, awaiting_gpu, mark_unverified
from .evaluation.pool import BackendPool
from .gpu import GpuSession, no_gpu_message
from .gpu_request import GpuPlan
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


class Verifier:
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


def expected_arch() -> str | None:
    """The arch of this machine's first GPU, known before any GPU worker starts (nvidia-smi), so
    that the check workers can compile spec'd files for it (None: unknown; the fake GPU, which
    loads no real CUBIN: its callers' own compile runs in the GPU phase, as before)."""
    from .compile import local_gpu_arch

    return local_gpu_arch()
