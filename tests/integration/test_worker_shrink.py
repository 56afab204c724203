"""Compile workers that shrink when idle (issue 33, memory): after a burst, the server's pool
keeps one worker and ends the others once they were idle `shrink_after_s`; each worker gives
back what a job freed (procs.release_memory) when no job waits."""

from __future__ import annotations

import os
import time

from kernel_lsp import procs
from kernel_lsp.compile.jobs import WorkerPool


def _sleep_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _settle(pool: WorkerPool, processes: int, shrunk: int, within_s: float = 20.0) -> None:
    # The pool counts a worker as shrunk once it has left (after up to IDLE_LEAVE_S), not when it
    # stops counting among the processes: wait for both (CI saw processes 1, shrunk 0).
    deadline = time.monotonic() + within_s
    while (pool.processes, pool.shrunk) != (processes, shrunk) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_idle_workers_beyond_one_end_and_the_pool_still_works():
    pool = WorkerPool(2, "spawn", shrink_after_s=1.0)
    try:
        # Two jobs at once: two workers.
        futures = [pool.submit(_sleep_pid, (1.0,), 60) for _ in range(2)]
        assert len({f.result(60) for f in futures}) == 2
        _settle(pool, 1, shrunk=1)
        assert pool.processes == 1 and pool.shrunk == 1
        time.sleep(1.0)
        assert pool.processes == 1  # the last one stays (the server ends it after worker_idle_s)
        assert pool.submit(os.getpid, (), 60).result(60) == pool.pids()[0]
    finally:
        pool.close()


def test_without_shrink_after_s_the_pool_keeps_its_workers():
    pool = WorkerPool(2, "spawn")
    try:
        futures = [pool.submit(time.sleep, (1.0,), 60) for _ in range(2)]
        [f.result(60) for f in futures]
        time.sleep(1.5)
        assert pool.processes == 2 and pool.shrunk == 0
    finally:
        pool.close()


def _heap_after_garbage() -> tuple[int, int]:
    """(RSS kB with 200 MB freed among survivors, RSS kB after release_memory)."""

    def rss() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    garbage = [bytes(4000) for _ in range(50_000)]
    kept = garbage[::64]  # a few survivors: the heap cannot shrink from its top alone
    del garbage
    before = rss()
    procs.release_memory()
    after = rss()
    del kept
    return before, after


def test_release_memory_gives_freed_heap_back():
    pool = WorkerPool(1, "spawn")
    try:
        before, after = pool.submit(_heap_after_garbage, (), 60).result(60)
    finally:
        pool.close()
    assert before - after > 50_000, (before, after)  # kB: most of the 200 MB freed went back
