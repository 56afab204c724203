"""Worker processes of `--check`: a job's deadline is its own, a hung or crashed worker is replaced
at once and the other files are still checked; compile pools end without tracebacks at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel_lsp.compile.jobs import JobFailed, run_jobs

pytestmark = pytest.mark.slow  # the slow tier (hung and killed workers, waited out): python -m pytest -m slow

REPO = Path(__file__).resolve().parents[2]
HANGING_SPEC = "while True:\n    pass\n"
KERNEL = "__global__ void {name}(float* x) {{ x[threadIdx.x] = 1.0f; }}\n"


def test_each_job_has_its_own_deadline_and_a_hung_worker_is_replaced():
    # One worker: the job after the hung one still runs, in a fresh worker.
    jobs = [(0.0,), (600.0,), (0.0,), ("not a number",), (0.0,)]
    start = time.monotonic()
    results = run_jobs(time.sleep, jobs, workers=1, timeout_s=3.0)
    assert results[0] is None and results[2] is None and results[4] is None
    assert results[1] == JobFailed("timeout", seconds=3.0)
    assert (
        isinstance(results[3], JobFailed)
        and results[3].reason == "error"
        and "TypeError" in results[3].detail
    )
    assert time.monotonic() - start < 60  # not the 600 s sleep


def test_a_worker_that_dies_is_a_crash_and_the_rest_go_on():
    results = run_jobs(os._exit, [(3,), (4,)], workers=2, timeout_s=30.0)
    assert [r.reason for r in results] == ["crashed", "crashed"]
    assert "exit code 3" in results[0].detail
    assert run_jobs(os.getpid, [(), ()], workers=1, timeout_s=30.0)[0] > 0


def test_hanging_specs_do_not_stall_the_other_files(tmp_path):
    # Two specs that never return fill both workers; the third file must still be checked
    # (before: one deadline for the whole run, and it was reported as timed out too).
    for name in ("hang1", "hang2"):
        (tmp_path / f"{name}.cu").write_text(KERNEL.format(name=name))
        (tmp_path / f"{name}.spec.py").write_text(HANGING_SPEC)
    (tmp_path / "zgood.cu").write_text(KERNEL.format(name="good"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERNEL_LSP_JOB_TIMEOUT_S": "5"}
    p = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", "-v", "--no-gpu", "--arch", "sm_90", "-j", "2", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for name in ("hang1", "hang2"):
        assert (
            f"{name}.spec.py:1:1: error: {name}.spec.py did not return within 5 s while {name}.cu was checked, "
            "and was stopped: does it (or something it imports) loop or wait forever? (checkTimeoutSeconds) [timeout]"
            in lines
        )
    assert any(ln.startswith("zgood.cu: kernel good [sm_90]") for ln in lines), p.stdout
    # The two whose specs hung are not checked (no verdict on their kernels), not passed.
    assert lines[-1].startswith("checked 1 file(s) for sm_90: 2 error(s)") and "2 skipped" in lines[-1]
    assert "leaked" not in p.stderr and "Traceback" not in p.stderr, p.stderr


END_POOL_SCRIPT = textwrap.dedent(
    """\
    import time
    from kernel_lsp.compile import compile_pool, end_pool

    if __name__ == "__main__":
        for _ in range(3):
            pool = compile_pool(2)
            futures = [pool.submit(time.sleep, 60) for _ in range(3)]
            time.sleep(0.5)
            manager = pool._executor_manager_thread
            workers = list(pool._processes.values())
            end_pool(pool)
            assert not manager.is_alive(), "the executor's thread outlived end_pool"
            assert not any(w.is_alive() for w in workers)
        print("ok")
    """
)


def test_end_pool_leaves_nothing_running_at_exit(tmp_path):
    script = tmp_path / "end_pool.py"
    script.write_text(END_POOL_SCRIPT)
    p = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert p.returncode == 0 and p.stdout == "ok\n", p.stdout + p.stderr
    assert p.stderr == "", p.stderr  # no `OSError: [Errno 9]` from concurrent.futures at exit
