"""A check job's time starts when its worker has it (kernel_lsp/compile/jobs.py): a new worker's
own start, which imports the engine before it reads the job, does not count against the job's
deadline. Before, a 4 s deadline (`KERNEL_LSP_JOB_TIMEOUT_S`) ran out while a worker started on 2
busy cores, and the spec it was meant to stop never ran."""

from __future__ import annotations

import time

from slow_start_job import START_S, answer

from kernel_lsp.compile.jobs import JobFailed, WorkerPool


def test_a_workers_slow_start_does_not_count_against_its_jobs_time():
    # Spawned, as the server's workers are after the first: the worker imports the job's module.
    pool = WorkerPool(1, context="spawn")
    try:
        started = time.monotonic()
        result = pool.submit(answer, (41,), 1.0).result(timeout=120)
        took = time.monotonic() - started
    finally:
        pool.close()
    assert not isinstance(result, JobFailed), result
    assert result == 42
    assert took >= START_S  # the worker's start took longer than the job's 1 s


def test_a_job_past_its_own_time_is_still_stopped():
    pool = WorkerPool(1)
    try:
        result = pool.submit(time.sleep, (30,), 1.0).result(timeout=120)
    finally:
        pool.close()
    assert isinstance(result, JobFailed) and result.reason == "timeout"
