"""The one road from a front end's CheckRequest to its FileCheck (issue 47): the server, `check`
(its run over files, `--watch` and `--stdin`) hand a CheckScheduler typed requests and get Futures of plain
results back. It owns what they used to hold each: the compile workers (processes: a compiler or
a spec that hangs can only be stopped there), each check's deadline and memory limit (the file's
settings), the first look beside a full check, background checks, cancel tokens, and the
workers' lifetime (started when first needed, ended on request or when idle)."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, as_completed
from typing import TYPE_CHECKING, Any, TypeVar

from .check import FileCheck, awaiting_gpu, failed_check, job_deadline
from .check_jobs import (
    Prebuilt,
    check_job,
    default_workers,
    files_job,
    front_end_job,
    prebuild_library,
    warm_up,
)
from .compile.cancel import cancel
from .compile.jobs import JobFailed, WorkerPool
from .gpu_request import FileDone, GpuPlan
from .tempdirs import make as make_temp_folder
from .workspace import CheckRequest, Workspace

if TYPE_CHECKING:
    from .config import Settings

log = logging.getLogger(__name__)

Raw = TypeVar("Raw")
Result = TypeVar("Result")


def _then(raw: Future[Raw], convert: Callable[[Raw], Result]) -> Future[Result]:
    """A Future of `convert(raw's result)`: the pool's answer turned into the front ends' result
    on the pool's thread (an exception, the pool closed under the job, passes through)."""
    out: Future[Result] = Future()

    def done(f: Future[Raw]) -> None:
        try:
            out.set_result(convert(f.result()))
        except BaseException as e:
            out.set_exception(e)

    raw.add_done_callback(done)
    return out


def _worded(
    request: CheckRequest, workspace: Workspace, result: FileCheck | JobFailed, tool_errors: bool
) -> FileCheck:
    """A check's result as the front ends get it: a job that did not finish is a FileCheck that
    says so; where the engine itself raised, with `tool_errors` (the CLI), a RuntimeError."""
    if not isinstance(result, JobFailed):
        return result
    if result.reason == "error" and tool_errors:
        raise RuntimeError(f"checking {request.path}: {result.detail}")
    log.error(
        "checking %s did not finish: %s %s (%s)", request.path, result.reason, result.phase, result.detail
    )
    return failed_check(request.path, result, workspace.settings_for(request.path))


class CheckScheduler:
    """Checks in worker processes, at most `workers` at once (default: one per core, at most
    four). `spawn`: workers started fresh, never forked (a caller with threads: the server);
    `shrink_after_s` > 0: after a burst, the workers beyond one end after that long idle."""

    def __init__(self, workers: int | None = None, spawn: bool = False, shrink_after_s: float = 0.0) -> None:
        self.workers = workers or default_workers()
        self._context = "spawn" if spawn else None
        self._shrink_after_s = shrink_after_s
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()
        self._cancel_dir: str | None = None
        self._serial = 0

    def _executor(self) -> WorkerPool:
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(self.workers, self._context, shrink_after_s=self._shrink_after_s)
            return self._pool

    @property
    def running(self) -> bool:
        """Whether workers are up (or starting): they start with the first job."""
        return self._pool is not None

    # --- checks --------------------------------------------------------------------------------

    def check(
        self,
        request: CheckRequest,
        workspace: Workspace,
        on_preview: Callable[[object], None] | None = None,
        tool_errors: bool = False,
    ) -> Future[FileCheck]:
        """The full check of `request` in a worker. A check that did not finish (its deadline,
        the memory limit, a crash) is a FileCheck that says so, never a verdict on the code;
        `on_preview(CompileResult)`: NVRTC's errors while nvcc decides, from the pool's thread.
        A `batch` request (a walk nobody is looking at: the server's start-up check) runs one at
        a time, only while nothing else waits, at a lower CPU priority. Where the engine itself
        raised (not the user's code), the check is an `internal` finding, or with `tool_errors`
        (the CLI: the tool failed, exit 2) a RuntimeError from the Future."""
        settings = workspace.settings_for(request.path)
        raw = self._executor().submit(
            check_job,
            (request, workspace),
            job_deadline(settings),
            settings.compile_memory_bytes,
            on_preview,
            background=request.trigger == "batch",
        )
        return _then(raw, lambda result: _worded(request, workspace, result, tool_errors))

    def check_and_build(
        self, request: CheckRequest, workspace: Workspace
    ) -> Future[tuple[FileCheck, Prebuilt | None]]:
        """A run's file (`check`), as `check` with `tool_errors`, and with `request.gpu_arch`
        where it has a spec and compiled cleanly: its compile for that arch, made in its worker
        (`check_jobs.Prebuilt`), and for an entry spec the shared library its entries run, built
        by one more job (None, or no library, where that did not work out: the GPU phase builds
        them itself)."""
        settings = workspace.settings_for(request.path)
        deadline, memory = job_deadline(settings), settings.compile_memory_bytes
        pool = self._executor()
        out: Future[tuple[FileCheck, Prebuilt | None]] = Future()

        def checked(f: Future[tuple[FileCheck, Prebuilt | None] | JobFailed]) -> None:
            try:
                result = f.result()
                if isinstance(result, JobFailed):
                    out.set_result((_worded(request, workspace, result, tool_errors=True), None))
                    return
                check, prebuilt = result
                if prebuilt is None or not prebuilt.entries:
                    out.set_result((check, prebuilt))
                    return
                built = prebuilt

                def library(g: Future[Prebuilt | JobFailed]) -> None:
                    try:
                        with_library = g.result()
                    except BaseException as e:  # the pool closed under it
                        out.set_exception(e)
                        return
                    out.set_result((check, with_library if isinstance(with_library, Prebuilt) else built))

                pool.submit(prebuild_library, (prebuilt, request.path), deadline, memory).add_done_callback(
                    library
                )
            except BaseException as e:
                out.set_exception(e)

        pool.submit(files_job, (request, workspace), deadline, memory).add_done_callback(checked)
        return out

    def first_look(self, request: CheckRequest, workspace: Workspace) -> Future[FileCheck | None]:
        """The first phase of a check whose verdict may be nvcc's (NVRTC's, or nvcc's front end):
        None when it has nothing sooner than the full check, or did not finish."""
        settings = workspace.settings_for(request.path)
        raw = self._executor().submit(
            front_end_job, (request, workspace), job_deadline(settings), settings.compile_memory_bytes
        )
        return _then(raw, lambda result: result if isinstance(result, FileCheck) else None)

    def warm_up(self, workspace: Workspace, nvrtc: bool = False) -> None:
        """Start every worker now and load what a check needs there (NVRTC too, with `nvrtc`)."""
        settings = workspace.settings
        pool = self._executor()
        for _ in range(self.workers):
            pool.submit(warm_up, (nvrtc,), settings.check_timeout_s, settings.compile_memory_bytes)

    # --- cancelling ----------------------------------------------------------------------------

    def new_token(self) -> str:
        """A fresh cancel token for a CheckRequest (compile/cancel.py: a file in a folder of the
        scheduler's own, removed on close)."""
        with self._lock:
            if self._cancel_dir is None:
                self._cancel_dir = make_temp_folder("kernel-lsp-cancel-")
            self._serial += 1
            return os.path.join(self._cancel_dir, str(self._serial))

    @staticmethod
    def cancel(token: str) -> None:
        """Stop the compiles of the checks that carry `token` (their results come back marked
        cancelled)."""
        cancel(token)

    # --- lifetime ------------------------------------------------------------------------------

    def stop_workers(self) -> Callable[[], None] | None:
        """Detach the workers (the next check starts new ones) and return what ends them, for
        the caller to run where joining processes may block (the server: off its loop)."""
        with self._lock:
            pool, self._pool = self._pool, None
        return pool.close if pool is not None else None

    def close(self) -> None:
        """End the workers and remove the cancel tokens' folder."""
        end = self.stop_workers()
        if end is not None:
            end()
        with self._lock:
            folder, self._cancel_dir = self._cancel_dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _with_defaults(plan: GpuPlan, settings: Settings) -> None:
    """A plan's GPUs default to the settings' (`gpu.devices`), else every GPU of this machine;
    on this machine their arch is asked first (nvidia-smi, no CUDA context), so that the check
    workers compile spec'd files for it."""
    from .evaluation.choose import wants_ray
    from .gpu_check import expected_arch

    local = not wants_ray(settings.evaluation_backend, settings.cluster_address)
    plan.gpus = plan.gpus or settings.gpu_devices or ("all" if local else None)
    if local and plan.arch is None:
        plan.arch = expected_arch()


def check_files(
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
    from .gpu_check import Verifier

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
    if plan is not None:
        _with_defaults(plan, workspace.settings_for(files[0]))
    # Its workers are forked when the first check is submitted, before any thread of the
    # verifier's starts (none is copied into them).
    scheduler = CheckScheduler(min(jobs, len(files)))
    verifier = Verifier(workspace, plan) if plan is not None else None
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
