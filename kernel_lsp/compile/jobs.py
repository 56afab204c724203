"""A batch of jobs in spawned worker processes, each job under its own deadline (`--check`).

Not a ProcessPoolExecutor: it cannot stop one job, so one spec that never returns held the whole
batch until a deadline for all of it (JOB_TIMEOUT_S × rounds), and ending it left its queues'
semaphores behind. Here each worker runs one job at a time over its own pipe; a job past its
deadline has its worker killed and replaced at once, and the other jobs go on."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


@dataclass(frozen=True)
class JobFailed:
    """What a job gave instead of a result: `timeout` (killed at its deadline), `crashed` (its
    worker died), `error` (it raised; `detail` says what)."""

    reason: str
    detail: str = ""


def _serve(conn: Connection) -> None:
    # Ctrl-C reaches the whole process group; the parent ends the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        fn, args = job
        try:
            reply: Any = (True, fn(*args))
        except Exception as e:  # the caller reports it with the job's path
            reply = (False, f"{type(e).__name__}: {e}")
        conn.send(reply)


class _Worker:
    def __init__(self, ctx) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.job: int | None = None
        self.deadline = 0.0

    def give(self, index: int, fn: Callable, args: tuple, timeout_s: float) -> None:
        self.job, self.deadline = index, time.monotonic() + timeout_s
        self.conn.send((fn, args))

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        self.process.join(5)
        self.conn.close()

    def stop(self) -> None:
        """Ask an idle worker to leave; kill it if it does not."""
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.process.join(5)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


def run_jobs(fn: Callable, jobs: Sequence[tuple], workers: int, timeout_s: float) -> list[Any | JobFailed]:
    """`fn(*args)` for each args in `jobs` in up to `workers` spawned processes (spawn: the
    caller may hold threads, and each worker starts without the parent's NVRTC state). Results
    in the order of `jobs`; a job that outlives `timeout_s` from when its worker got it, raises or
    kills its worker yields a JobFailed. `fn` must be importable (a module-level function)."""
    ctx = multiprocessing.get_context("spawn")
    results: list[Any | JobFailed] = [JobFailed("crashed")] * len(jobs)
    todo = deque(range(len(jobs)))
    idle: list[_Worker] = []
    busy: dict[Connection, _Worker] = {}
    try:
        idle = [_Worker(ctx) for _ in range(max(1, min(workers, len(jobs))))]
        while todo or busy:
            while idle and todo:
                w = idle.pop()
                i = todo.popleft()
                try:
                    w.give(i, fn, jobs[i], timeout_s)
                except OSError:  # it died on the way up; each job gets one worker, so this ends
                    results[i] = JobFailed(
                        "crashed", f"the worker did not start (exit code {w.process.exitcode})"
                    )
                    w.kill()
                    if todo:
                        idle.append(_Worker(ctx))
                    continue
                busy[w.conn] = w
            if not busy:
                continue
            next_deadline = min(w.deadline for w in busy.values())
            ready = wait(list(busy), timeout=max(0.0, next_deadline - time.monotonic()))
            for conn in ready:
                w = busy.pop(conn)  # type: ignore[arg-type]
                assert w.job is not None
                try:
                    ok, value = w.conn.recv()
                except (EOFError, OSError):  # the worker died (a crash in NVRTC or the spec)
                    w.process.join(5)  # its pipe closes before its exit status is there to read
                    results[w.job] = JobFailed("crashed", f"exit code {w.process.exitcode}")
                    w.kill()
                    if todo:
                        idle.append(_Worker(ctx))
                    continue
                results[w.job] = value if ok else JobFailed("error", value)
                idle.append(w)
            now = time.monotonic()
            for conn, w in list(busy.items()):
                if w.deadline <= now:
                    del busy[conn]
                    assert w.job is not None
                    results[w.job] = JobFailed("timeout")
                    w.kill()
                    if todo:
                        idle.append(_Worker(ctx))
    finally:
        for w in idle:
            w.stop()
        for w in busy.values():
            w.kill()
    return results
