"""A job whose module takes START_S to import in a worker process: a stand-in for a new worker's
start on a loaded machine (it imports the engine first: 6 to 8 s on 2 busy cores). Imported in the
test's own process it does not wait (tests/integration/test_job_start.py)."""

from __future__ import annotations

import multiprocessing
import time

START_S = 3.0

if multiprocessing.parent_process() is not None:
    time.sleep(START_S)


def answer(x: int) -> int:
    return x + 1
