"""Whether a process has ended, as the tests that watch for leftovers read it."""

from __future__ import annotations

import time
from pathlib import Path


def gone(pid: int, within_s: float = 0.0) -> bool:
    """The process has exited within `within_s` (a zombie that its new parent has not reaped yet
    counts: it runs nothing and holds no file)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
