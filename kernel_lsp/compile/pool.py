"""Spawned worker processes for compiles: NVRTC serialises compiles within one process, and a spec
that never returns must be stoppable."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .. import procs


def compile_pool(workers: int, initializer=None) -> ProcessPoolExecutor:
    """Worker processes for NVRTC (it serialises compiles within one process). Started with
    "spawn": the server forks from a process with threads (pygls, watchdog, the GPU client), which
    is unsafe, and a fresh process holds no state of the parent's NVRTC."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(initializer,),
    )


def _worker_init(initializer) -> None:
    # Dies with the parent, with what it started (the executor starts workers from whichever
    # thread submits: no signal tied to that thread).
    procs.become_worker(die_with_thread=False)
    if initializer is not None:
        initializer()


# The default deadline of one file's check (all its archs and its spec): past it the worker is
# ended with what it started, and the file is "not checked in time" (or its spec is named, when
# the spec was running). The setting `checkTimeoutSeconds` overrides it.
JOB_TIMEOUT_S = float(os.environ.get("KERNEL_LSP_JOB_TIMEOUT_S", "120"))
# The default address-space limit of a compile worker and the compilers it runs (MiB; 0: none).
# NVRTC loaded takes ~320 MiB of it; `-include /dev/zero` grew cc1plus to 24 GB before.
COMPILE_MEMORY_MB = int(os.environ.get("KERNEL_LSP_COMPILE_MEMORY_MB", "8192"))


def end_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a compile pool now: an NVRTC call or a stuck spec cannot be interrupted, and the
    interpreter would join the workers at exit. The workers are ended first and the executor
    then shut down with wait=True: with wait=False its manager thread outlived this call and, at
    interpreter exit, wrote to a pipe already closed (`OSError: [Errno 9] Bad file descriptor`)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for w in workers:
        with contextlib.suppress(Exception):  # already gone
            w.terminate()
    for w in workers:
        with contextlib.suppress(Exception):
            w.join(5)
    pool.shutdown(wait=True, cancel_futures=True)


class WorkerFailed(Exception):
    """The worker ran out of time (`reason` "timeout") or died ("crash"); it was replaced.
    `out_of_memory`: it died at the memory limit."""

    def __init__(self, reason: str, detail: str, out_of_memory: bool = False) -> None:
        super().__init__(detail)
        self.reason = reason
        self.out_of_memory = out_of_memory


_shared = None  # the WorkerPool of run_isolated
_shared_lock = threading.Lock()
SHARED_WORKERS = 2


def run_isolated(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float = JOB_TIMEOUT_S,
    memory_bytes: int = COMPILE_MEMORY_MB * 2**20,
) -> Any:
    """`fn(*args)` in a spawned worker shared by the process's callers (spec loads and compiles
    on the GPU and optimizer paths): the user's spec or a compiler crash cannot take the caller
    down; a call that outlives `timeout_s` or `memory_bytes` ends its worker (and what it
    started) alone. Raises WorkerFailed."""
    from .jobs import JobFailed, WorkerPool

    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = WorkerPool(SHARED_WORKERS, "spawn")
        pool = _shared
    result = pool.submit(fn, args, timeout_s, memory_bytes).result()
    if not isinstance(result, JobFailed):
        return result
    if result.reason == "timeout":
        raise WorkerFailed("timeout", f"took over {timeout_s:.0f} s and was stopped")
    raise WorkerFailed("crash", f"the worker process ended ({result.detail})", result.out_of_memory)
