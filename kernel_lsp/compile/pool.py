"""Spawned worker processes for compiles: NVRTC serialises compiles within one process, and a spec
that never returns must be stoppable."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any


def compile_pool(workers: int, initializer=None) -> ProcessPoolExecutor:
    """Worker processes for NVRTC (it serialises compiles within one process). Started with
    "spawn": the server forks from a process with threads (pygls, watchdog, the GPU client), which
    is unsafe, and a fresh process holds no state of the parent's NVRTC."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer
    )


# A check that runs longer than this is stuck, in a spec that never returns (NVRTC itself has no
# unbounded loops): its worker is ended and the file gets a diagnostic.
JOB_TIMEOUT_S = float(os.environ.get("KERNEL_LSP_JOB_TIMEOUT_S", "120"))


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
    """The worker ran out of time (`reason` "timeout") or died ("crash"); it was replaced."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


_shared: ProcessPoolExecutor | None = None
_shared_lock = threading.Lock()
SHARED_WORKERS = 2


def run_isolated(fn: Callable[..., Any], *args: Any, timeout_s: float = JOB_TIMEOUT_S) -> Any:
    """`fn(*args)` in a spawned worker shared by the process's callers (spec loads and compiles
    on the GPU and optimizer paths): the user's spec or a compiler crash cannot take the caller
    down, and a call that outlives `timeout_s` ends the workers. Raises WorkerFailed."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = compile_pool(SHARED_WORKERS)
        pool = _shared
    try:
        return pool.submit(fn, *args).result(timeout=timeout_s)
    except FutureTimeout:
        failure = WorkerFailed("timeout", f"took over {timeout_s:.0f} s and was stopped")
    except Exception as e:  # BrokenProcessPool: the worker died
        failure = WorkerFailed("crash", f"the worker process ended ({type(e).__name__}: {e})")
    with _shared_lock:
        if _shared is pool:
            _shared = None
    end_pool(pool)
    raise failure
