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
