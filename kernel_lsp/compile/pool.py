"""Spawned worker processes for compiles: NVRTC serialises compiles within one process, and a spec
that never returns must be stoppable."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

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
