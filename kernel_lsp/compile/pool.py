"""Spawned worker processes for compiles: NVRTC serialises compiles within one process, and a spec
that never returns must be stoppable."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor


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
