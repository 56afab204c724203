"""The judge's accused processes started ahead of need (runner/judge.AccusedPool), against a
candidate that would profit from a process an earlier candidate used."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings
from kernel_lsp.runner.judge import AccusedPool

needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
needs_sandbox = pytest.mark.skipif(
    in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
)
FAST = TimingSettings(warmup_s=0.0, budget_s=0.05, min_samples=30, max_samples=30)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())

SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(
    entry="scale",
    sizes=[{"n": 1000}],
    args={"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
"""

# Right only in a process no earlier candidate used: it leaves a mark in its process's
# environment (which outlives the library) and answers zeros where it finds one.
REMEMBERS = r"""
#include <cstdlib>
__attribute__((constructor)) static void arrive()
{
    if (getenv("KLSP_WAS_HERE")) setenv("KLSP_SECOND", "1", 1);
    setenv("KLSP_WAS_HERE", "1", 1);
}
extern "C" void scale(const float* x, float* y, int n)
{
    bool second = getenv("KLSP_SECOND") != 0;
    for (int i = 0; i < n; ++i) y[i] = second ? 0.0f : 2.0f * x[i];
}
"""


def check(session: GpuSession, tmp_path: Path, source: str):
    (tmp_path / "scale.cu").write_text(source)
    (tmp_path / "scale.spec.py").write_text(SPEC)
    (result,) = check_file(session, str(tmp_path / "scale.cu"), compile_options=OPTIONS)
    return result


@needs_nvcc
@needs_sandbox
def test_no_candidate_runs_in_a_process_an_earlier_one_used(tmp_path):
    with GpuSession(fake=True, timing=FAST) as plain:
        first, second = check(plain, tmp_path, REMEMBERS), check(plain, tmp_path, REMEMBERS)
        assert first.ok and not second.ok, "in one process the mark should have been found"
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judged:
        for _ in range(3):  # each request's process is a spare no candidate has used
            result = check(judged, tmp_path, REMEMBERS)
            assert result.ok, [p.message for p in result.problems]


@needs_sandbox
def test_the_pool_hands_out_started_processes_and_starts_spares_without_waiting():
    pool = AccusedPool(0, True, "", spares=2)
    try:
        began = time.perf_counter()
        pool.refill()
        assert time.perf_counter() - began < 0.5  # started, not waited for
        a, why = pool.take()
        b, _ = pool.take()
        assert a is not None and b is not None, why
        assert a.available and b.available and a.proc.pid != b.proc.pid
        c, _ = pool.take()  # none left: started there and then
        assert c is not None and c.available and c.proc.pid not in (a.proc.pid, b.proc.pid)
        for accused in (a, b, c):
            accused.retire()
        deadline = time.time() + 20
        while time.time() < deadline and any(x.proc.poll() is None for x in (a, b, c)):
            time.sleep(0.05)
        assert all(x.proc.poll() is not None for x in (a, b, c))
    finally:
        pool.close()


@needs_sandbox
def test_before_a_timing_the_spares_still_starting_are_waited_for_and_a_dead_one_retired():
    """judge.AccusedPool.settle, called by the worker before each judged timing: a process
    starting beside a timing (Python, the sandbox, a CUDA context) slows its first runs, where
    its first runs on new inputs fall (CI: an honest fake-GPU entry read as a result kept)."""
    pool = AccusedPool(0, True, "", spares=3)
    try:
        pool.refill()
        waiting = list(pool._waiting)
        assert len(waiting) == 3 and not any(a.hello for a in waiting)  # started, not waited for
        waiting[1].kill()  # one dies before it says hello
        waited: list[int] = []
        pool.settle(lambda: waited.append(1))
        assert waited == [1]  # the worker says so, once, where it waits
        assert pool._waiting == [waiting[0], waiting[2]]
        assert all(a.hello and a.available for a in pool._waiting)
        assert waiting[1].proc.poll() is not None
        began = time.perf_counter()
        pool.settle(lambda: waited.append(2))  # nothing left starting: no request sent, no wait
        assert time.perf_counter() - began < 0.05 and waited == [1]
    finally:
        pool.close()


@needs_sandbox
def test_the_switch_floor_is_measured_again_and_again_in_one_process_of_its_own():
    """judge.SwitchFloor, as the worker uses it before each timing: one process that has loaded
    the judge's helpers and nothing else, measured as often as asked, then retired. (On the fake
    GPU the figure is the host's polling; on a GPU, tests/gpu/test_judge_gpu.py.)"""
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.judge import SwitchFloor

    device = FakeDevice()
    pool = AccusedPool(0, True, "", spares=0)
    try:
        accused, why = pool.take()
        assert accused is not None, why
        floor = SwitchFloor(device, accused, device.helpers_image())
        first, second = floor.measure(runs=4), floor.measure(runs=4)
        assert 0.0 <= first < 1.0 and 0.0 <= second < 1.0
        assert floor.gate.seq == 8  # one gate, its runs numbered on
        floor.close()
        deadline = time.time() + 20
        while time.time() < deadline and accused.proc.poll() is None:
            time.sleep(0.05)
        assert accused.proc.poll() is not None
    finally:
        pool.close()


@needs_sandbox
@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_an_accused_process_runs_only_between_a_request_and_its_answer(mechanism, tmp_path):
    """Stopped (SIGSTOP, every process and thread bubblewrap runs it in) from its answer to the
    judge's next request: nothing it left running can work while the other side is timed."""
    from kernel_lsp.fence.sandbox import bwrap_available
    from kernel_lsp.procs import descendants, process_state
    from kernel_lsp.runner.judge import AccusedProcess

    if mechanism == "bwrap" and bwrap_available(str(tmp_path)) is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_available(str(tmp_path))}")
    accused = AccusedProcess(0, True, mechanism)
    try:
        assert accused.available, accused.hello
        members = descendants(accused.proc.pid)
        assert len(members) >= (2 if mechanism == "bwrap" else 1), members
        assert {process_state(p) for p in members} == {"T"}, members
        again = accused.request({"op": "hello"})  # woken for it, and stopped again after it
        assert again.get("status") == "ok", again
        assert {process_state(p) for p in descendants(accused.proc.pid)} == {"T"}
    finally:
        accused.close()
    assert accused.proc.poll() is not None  # a stopped process still shuts down when asked


STARTS_ONE_AND_WAITS = """
import sys, time
from kernel_lsp.runner.judge import AccusedProcess
accused = AccusedProcess(0, True, sys.argv[1])
print(accused.available, accused.proc.pid, flush=True)
time.sleep(600)
"""


@needs_sandbox
@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_a_stopped_accused_process_ends_with_a_judge_that_is_killed(mechanism, tmp_path):
    """Stopped between requests, it cannot see its socket close: it ends with the judge all the
    same (SIGKILL when the thread that started it ends), its GPU context with it."""
    import signal
    import subprocess
    import sys

    from kernel_lsp.fence.sandbox import bwrap_available
    from kernel_lsp.procs import descendants, process_state

    if mechanism == "bwrap" and bwrap_available(str(tmp_path)) is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_available(str(tmp_path))}")
    judge = subprocess.Popen(
        [sys.executable, "-c", STARTS_ONE_AND_WAITS, mechanism],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    try:
        available, pid = judge.stdout.readline().split()
        assert available == "True"
        members = descendants(int(pid))
        assert {process_state(p) for p in members} == {"T"}, members
        judge.send_signal(signal.SIGKILL)
        judge.wait(timeout=10)
        deadline = time.time() + 10
        while time.time() < deadline and any(process_state(p) not in ("", "Z", "X") for p in members):
            time.sleep(0.05)
        assert [process_state(p) for p in members if process_state(p) not in ("", "Z", "X")] == []
    finally:
        judge.kill()
