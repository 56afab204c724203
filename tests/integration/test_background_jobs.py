"""Background jobs of the worker pool (issue 45: the server's start-up check of a workspace of 35
heavy files kept both cores busy for minutes): they run after every other job, one at a time, in
a worker of their own at a lower CPU priority, which ends when idle."""

from __future__ import annotations

import os
import time

from kernel_lsp.compile.jobs import BACKGROUND_NICE, WorkerPool


def _stamp(seconds: float) -> tuple[float, float, int, int]:
    """(start, end, pid, nice) of a job that sleeps `seconds`."""
    start = time.monotonic()
    time.sleep(seconds)
    return start, time.monotonic(), os.getpid(), os.getpriority(os.PRIO_PROCESS, 0)


def test_background_jobs_wait_for_the_others_run_one_at_a_time_and_at_low_priority():
    pool = WorkerPool(2, "spawn", shrink_after_s=1.0)
    try:
        # The foreground jobs first: a background job submitted while nothing else is queued or
        # running may start at once (the pool cannot know what comes next), and on a loaded
        # machine the pool's thread can dispatch one between two submissions (one CI run did).
        foreground = [pool.submit(_stamp, (1.0,), 60) for _ in range(2)]
        background = [pool.submit(_stamp, (0.3,), 60, background=True) for _ in range(3)]
        fg = [f.result(60) for f in foreground]
        bg = [f.result(60) for f in background]
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert {nice for *_, nice in fg} == {base}
        assert {nice for *_, nice in bg} == {min(19, base + BACKGROUND_NICE)}
        # Submitted while the others were queued or running, the background jobs started after
        # they ended, in turn, in one worker that is none of the others.
        assert min(start for start, *_ in bg) >= max(end for _, end, *_ in fg)
        ordered = sorted(bg)
        assert all(ordered[i][1] <= ordered[i + 1][0] for i in range(len(ordered) - 1))
        assert len({pid for *_, pid, _ in bg}) == 1 and not {pid for *_, pid, _ in bg} & {p for *_, p, _ in fg}
        # A job submitted while a background one runs is not held up by it.
        late_bg = pool.submit(_stamp, (2.0,), 60, background=True)
        time.sleep(0.5)
        started = time.monotonic()
        quick = pool.submit(_stamp, (0.0,), 60).result(60)
        assert quick[0] - started < 1.5 and not late_bg.done()
        late_bg.result(60)
        # Idle, the background worker ends (the foreground pool keeps one).
        deadline = time.monotonic() + 20
        while pool.processes > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.processes == 1
    finally:
        pool.close()
