"""A GPU backend never makes its caller wait out the work in flight: closing it ends the tools it
runs (ncu, compute-sanitizer, with the launch they watch) and its worker at once, and its device,
once known, is answered while a check holds the GPU. So the server answers hover, code lenses and
`shutdown` in time even while a 20 s profile or a hung kernel is running. Fake GPU, no CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_evaluation import _fake_compile
from test_multi_gpu import SPEC, with_behaviour

from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.procs import ToolRuns
from kernel_lsp.spec import load_specs

# A tool that starts a child of its own (as ncu starts the profiled launch) and waits for it.
TOOL = "import subprocess, sys; child = subprocess.Popen(['sleep', '60']); open(sys.argv[1], 'w').write(str(child.pid)); child.wait()"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, killed too, cannot reap it at once).
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def wait_for_file(path: Path, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, "the tool did not start"
        time.sleep(0.05)
    return int(path.read_text())


def test_end_all_kills_a_running_tool_with_its_child_and_refuses_new_ones(tmp_path):
    runs, pidfile, outcome = ToolRuns(), tmp_path / "child", []

    def run() -> None:
        try:
            outcome.append(runs.run([sys.executable, "-c", TOOL, str(pidfile)], 60))
        except OSError as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    child = wait_for_file(pidfile)
    t0 = time.monotonic()
    runs.end_all()
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - t0 < 5
    # Killed, not finished: said as the owner's close, whether the kill or the poll saw it first.
    assert isinstance(outcome[0], OSError) and "closed" in str(outcome[0]), outcome
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the tool's child outlived it"
    with pytest.raises(OSError, match="closed"):
        runs.run(["true"], 5)


def test_a_tool_past_its_timeout_is_killed_with_its_child(tmp_path):
    pidfile = tmp_path / "child"
    with pytest.raises(subprocess.TimeoutExpired):
        ToolRuns().run([sys.executable, "-c", TOOL, str(pidfile)], 1.5)
    child = wait_for_file(pidfile, 1.0)
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_closing_a_session_cuts_a_hung_check_short(tmp_path, monkeypatch):
    monkeypatch.setattr(GpuSession, "compile", _fake_compile)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    cu = str(tmp_path / "vadd.cu")
    session = GpuSession(
        fake=True, launch_timeout_s=120.0, timing=TimingSettings(cold_l2=False, budget_s=0.1)
    )
    assert session.available, session.reason
    device = session.device
    assert device is not None
    source = with_behaviour("hang")
    results: list = []
    thread = threading.Thread(
        target=lambda: results.append(
            session.check(
                GpuCheckRequest(source, cu, kernel="vadd", spec=loaded, artifact=session.compile(source, cu))
            )
        )
    )
    thread.start()
    time.sleep(2.0)  # the worker is inside the hung launch (its timeout: 120 s)
    t0 = time.monotonic()
    assert session.device is device  # the server asks on its event loop: answered at once
    assert time.monotonic() - t0 < 0.5
    t0 = time.monotonic()
    session.close()
    closed_in = time.monotonic() - t0
    thread.join(timeout=15)
    assert not thread.is_alive() and closed_in < 8, closed_in
    assert not results[0].ok
    assert not session.available and "closed" in session.reason
