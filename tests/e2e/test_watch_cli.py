"""`kernel-lsp --check --watch` in a terminal: a full report first, then only what changed."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOOD_HEADER = "__device__ float scale(float x) { return 2.0f * x; }\n"
BAD_HEADER = "__device__ float scale(float x) { return 2.0f * undefined_y; }\n"
KERNEL = '#include "h.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = scale(x[threadIdx.x]); }\n'
OTHER = "__global__ void other(float* x) { x[0] = 1.0f; }\n"


class Lines:
    """Reads a pipe in a thread so the test can wait for lines with a timeout."""

    def __init__(self, pipe) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe) -> None:
        for line in pipe:
            self.q.put(line.rstrip("\n"))

    def until(self, predicate, timeout: float = 90.0) -> list[str]:
        """Lines up to and including the first that satisfies `predicate`."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.1)
            except queue.Empty:
                continue
            got.append(line)
            self.seen.append(line)
            if predicate(line):
                return got
        raise AssertionError(f"timed out; got {got!r}")


def stop(p: subprocess.Popen) -> int:
    """SIGTERM, then SIGKILL: SIGINT alone does not stop a child that ignores it (a background
    job), and the test must never leave a `--check --watch` running."""
    if p.poll() is None:
        p.terminate()
        try:
            return p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    return p.wait(timeout=30)


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_check_watch_prints_only_what_changed(tmp_path):
    (tmp_path / "h.cuh").write_text(GOOD_HEADER)
    (tmp_path / "main.cu").write_text(KERNEL)
    (tmp_path / "other.cu").write_text(OTHER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp", "check", "--watch", "--no-gpu", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=ignore_sigint,  # as a background job of a shell gets it: SIGINT ignored
    )
    try:
        out, err = Lines(p.stdout), Lines(p.stderr)
        first = out.until(lambda line: line.startswith("checked 3 file(s)"))
        assert any(line.startswith("main.cu: kernel k") for line in first)
        err.until(lambda line: "watching" in line)

        (tmp_path / "h.cuh").write_text(BAD_HEADER)
        change = out.until(lambda line: "file(s) changed" in line)
        # The header's error once, at the header, with the #include that leads to it under it.
        assert any(line.startswith("h.cuh:1:") and "undefined_y" in line for line in change)
        assert "    main.cu:1:1: includes h.cuh here" in change
        assert not any(line.startswith("other.cu") for line in change), change  # unchanged: not printed
        # main.cu's kernel did not compile: its block changed, and holds no copy of the error.
        assert not any(line.startswith("main.cu") and "error" in line for line in change), change
        assert "now 1 error(s)" in change[-1]

        (tmp_path / "h.cuh").write_text(GOOD_HEADER)
        change = out.until(lambda line: "file(s) changed" in line)
        assert "h.cuh: no findings" in change
        assert "now 0 error(s)" in change[-1]

        (tmp_path / "new.cu").write_text("__global__ void n(float* x) { x[0] = nope; }\n")
        change = out.until(lambda line: "file(s) changed" in line)
        assert any(line.startswith("new.cu:1:") and "nope" in line for line in change)
        assert "1 file(s) changed" in change[-1]

        (tmp_path / "new.cu").unlink()
        change = out.until(lambda line: "file(s) changed" in line)
        assert change[:-1] == ["new.cu: deleted"]
    finally:
        code = stop(p)
    assert code == 0  # SIGTERM ends it like Ctrl-C: the files last checked are clean
