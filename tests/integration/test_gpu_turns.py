"""Turns on one GPU between worker processes (runner/turns.py): a timed launch has the GPU alone
(no other process's shared turn runs beside its exclusive one), and once a timer waits, no new
shared turn starts before it has had its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel_lsp.runner.turns import GpuTurns

ROOT = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent(
    """\
    import sys, time
    from kernel_lsp.runner.turns import GpuTurns
    folder, mode, delay, hold, log = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    turns = GpuTurns("test", folder)
    time.sleep(delay)
    with (turns.exclusive() if mode == "exclusive" else turns.shared()):
        with open(log, "a") as f:
            f.write(f"{mode} start {time.time()}\\n")
        time.sleep(hold)
        with open(log, "a") as f:
            f.write(f"{mode} end {time.time()}\\n")
    """
)


def holder(folder: Path, mode: str, delay: float, hold: float, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), mode, str(delay), str(hold), str(log)], env=env
    )


def events(log: Path) -> dict[str, float]:
    out = {}
    for line in log.read_text().splitlines():
        mode, what, at = line.split()
        out[f"{mode} {what}"] = float(at)
    return out


def test_a_shared_turn_waits_for_an_exclusive_one_held_by_another_process(tmp_path):
    log = tmp_path / "log"
    timer = holder(tmp_path, "exclusive", 0.0, 1.0, log)
    deadline = time.monotonic() + 20
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    turns = GpuTurns("test", str(tmp_path))
    with turns.shared():
        got = time.time()
    assert timer.wait(20) == 0
    assert got >= events(log)["exclusive end"]
    assert turns.waited_s > 0.3


def test_shared_turns_run_side_by_side_and_a_waiting_timer_goes_before_later_ones(tmp_path):
    log = tmp_path / "log"
    first = holder(tmp_path, "shared", 0.0, 1.5, log)
    deadline = time.monotonic() + 20
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    timer = holder(tmp_path, "exclusive", 0.0, 0.5, tmp_path / "timer.log")
    time.sleep(0.5)  # the timer waits for the first shared turn by now
    later = GpuTurns("test", str(tmp_path))
    with later.shared():
        got = time.time()
    assert first.wait(20) == 0 and timer.wait(20) == 0
    shared, timed = events(log), events(tmp_path / "timer.log")
    assert timed["exclusive start"] >= shared["shared end"]  # the GPU to the timer alone
    assert got >= timed["exclusive end"]  # the later shared turn waited for the timer's
    # Within one process, a turn inside a turn held is that turn.
    with later.shared(), later.shared():
        pass


def test_lock_files_another_user_made_are_not_used(tmp_path):
    """In a shared /tmp another user could make the lock files first and hold them for ever: a
    file this user does not own is refused (the worker then runs without turns, and says so)."""
    if os.getuid() != 0:
        pytest.skip("needs root to make a file owned by another user")
    gate = tmp_path / f"kernel-lsp-{os.getuid()}-gpu-test.gate"
    gate.write_text("")
    os.chown(gate, 65534, 65534)
    try:
        GpuTurns("test", str(tmp_path))
    except PermissionError as e:
        assert "another user" in str(e)
    else:
        raise AssertionError("a lock file owned by another user was used")
    os.chown(gate, os.getuid(), os.getgid())
    GpuTurns("test", str(tmp_path)).close()  # its own: used


def test_a_verification_waiting_for_its_turn_is_not_taken_for_a_hang(tmp_path):
    """Another process times a launch for longer than this check's launch timeout (1 s): the
    check's verification waits for its turn, then runs; its launch timeout starts once it holds
    the turn (runner/verify.CaseRunner.verify_case), so the wait is not read as a hung kernel."""
    import tempfile
    import threading

    from test_isolation import SPEC, STEPS  # a fake vadd (runner/fake.py) and its spec

    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.runner.fake import fake_cubin
    from kernel_lsp.spec import load_specs

    (tmp_path / "vadd.spec.py").write_text(SPEC)
    spec = load_specs(str(tmp_path / "vadd.spec.py")).specs[0]
    held, done = threading.Event(), threading.Event()

    def timer_elsewhere() -> None:  # the fake GPU 0's turns, as every worker on it takes them
        turns = GpuTurns("fake0", tempfile.gettempdir())
        with turns.exclusive():
            held.set()
            done.wait(3.0)
        turns.close()

    with GpuSession(fake=True, launch_timeout_s=1.0) as session:
        assert session.available, session.reason
        thread = threading.Thread(target=timer_elsewhere)
        thread.start()
        assert held.wait(10)
        try:
            start = time.perf_counter()
            result = session.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, measure=False)
            waited = time.perf_counter() - start
        finally:
            done.set()
            thread.join()
    assert result.ok, result.message
    assert waited >= 2.0  # it did wait for the other process's turn


def test_each_fake_gpu_has_its_own_turns_whatever_index_its_process_sees(monkeypatch):
    """A Ray actor's fake GPU is its device 0 with CUDA_VISIBLE_DEVICES naming the GPU it holds:
    two actors' workers must not take turns as if on one GPU (they did: both keyed `fake0`)."""
    from kernel_lsp.runner.turns import device_key

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [device_key({"index": i}, fake=True) for i in (0, 1)] == ["fake0", "fake1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the second actor's
    assert device_key({"index": 0}, fake=True) == "fake1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    assert [device_key({"index": i}, fake=True) for i in (0, 1)] == ["fake3", "fake2"]
    # A real GPU is named by its PCI place, the same in every process: two GPUs a VM put on one
    # bus are two; with no place known, by its index among all devices.
    assert device_key({"index": 0, "pci_bus_id": 25}, fake=False) == "pci25"
    on_one_bus = [{"index": 0, "pci_bus_id": 0, "pci_device_id": slot} for slot in (5, 6)]
    assert len({device_key(info, fake=False) for info in on_one_bus}) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert device_key({"index": 0, "pci_bus_id": 0}, fake=False) == "dev1"


# What a process has open, one target a line (its listing's own descriptor is gone when read).
OPEN_FILES = """
import contextlib, os
for fd in os.listdir("/proc/self/fd"):
    with contextlib.suppress(OSError):
        print(os.readlink(f"/proc/self/fd/{fd}"))
"""


@pytest.mark.parametrize("tool", ["profile", "sanitize"])
def test_a_tool_run_has_the_gpu_alone(monkeypatch, tmp_path, tool):
    """ncu replaying a kernel, or compute-sanitizer instrumenting a launch, holds an exclusive turn
    on its GPU: no other process's verification or timed launch runs beside it (a judged timing
    beside a test's ncu profile read an honest 31 us entry as 366 us on an H100)."""
    import fcntl
    import tempfile

    from kernel_lsp.evaluation import local
    from kernel_lsp.gpu_reports import ProfileReport, SanitizerReport
    from kernel_lsp.runner.turns import device_key

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the turns' lock files, in-process
    seen: list[str] = []

    def another_process_verifying() -> str:
        """What a shared turn of another process gets now: its own open file, as a worker's."""
        key = device_key(backend._hello["device"], fake=True)
        fd = os.open(tmp_path / f"kernel-lsp-{os.getuid()}-gpu-{key}.use", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return "shared turn taken"
        except BlockingIOError:
            return "waits"
        finally:
            os.close(fd)

    def tool_run(*args, **kwargs):
        seen.append(another_process_verifying())
        # The tool's process, where a candidate's launch runs (the proof gate): even a child that
        # keeps every inheritable descriptor gets none of the turn's files, so its code can
        # neither let the turn go early nor hold it past the tool's end.
        child = subprocess.run(
            [sys.executable, "-c", OPEN_FILES], capture_output=True, text=True, close_fds=False
        )
        seen.append(
            "turn files in the tool's process" if "-gpu-" in child.stdout else "none in the tool's process"
        )
        return ProfileReport(note="not run") if tool == "profile" else SanitizerReport(note="not run")

    monkeypatch.setattr(local, "profile_kernels", tool_run)
    monkeypatch.setattr(local, "sanitize", tool_run)
    backend = local.LocalBackend(fake=True, use_device_cache=False)
    try:
        assert backend.available, backend.reason
        run = {
            "profile": lambda: backend.profile("ncu", {"case": "n=1"}, b"", {}, "k.cu"),
            "sanitize": lambda: backend.sanitize("compute-sanitizer", {"case": "n=1"}, b"", ("memcheck",)),
        }[tool]
        run()
        assert seen == ["waits", "none in the tool's process"]
        assert another_process_verifying() == "shared turn taken"  # and let go after
        # A worker that died since is not started again just to name the GPU's turn.
        backend._worker.kill()
        backend._worker.proc.wait(10)
        run()
        assert seen[2:] == ["waits", "none in the tool's process"] and backend.restarts == 0
    finally:
        backend.close()
