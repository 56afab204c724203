"""Turns on one GPU for several worker processes (issue 31: `check` runs a few files at once on
each GPU, because verifying a kernel is mostly the CPU's work: inputs, references, comparisons).

Verification runs of different processes may share the GPU: each holds a *shared* turn around
its GPU work (uploads, launches, downloads). Timed launches hold an *exclusive* turn: nothing of
another kernel-lsp process runs on that GPU while a kernel is timed, so the figures are the ones
a GPU to itself gives. A turnstile makes the exclusive turn fair: once a timer waits, no new
shared turn starts until it has had its own.

Two `flock`ed files per device (per user) carry the turns, so processes of one run and of
different runs (the server and a CLI on one machine) take turns alike, and a process that dies
drops its turns with it. One process takes one turn at a time (the worker's requests are
serial); a turn asked for inside one it holds is the one it holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Iterator


def _own_file(path: str, flags: int) -> int:
    """The lock file at `path`, only if this user owns it: one that another user made first
    (a shared /tmp) could be held by them forever."""
    fd = os.open(path, flags, 0o600)
    if os.fstat(fd).st_uid != os.getuid():
        os.close(fd)
        raise PermissionError(f"{path} belongs to another user")
    return fd


class GpuTurns:
    def __init__(self, key: str, folder: str | None = None):
        base = os.path.join(folder or tempfile.gettempdir(), f"kernel-lsp-{os.getuid()}-gpu-{key}")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        self._gate = _own_file(base + ".gate", flags)
        try:
            self._use = _own_file(base + ".use", flags)
        except OSError:
            os.close(self._gate)
            raise
        self._held = threading.local()  # the thread's depth of turns held
        self.waited_s = 0.0  # seconds spent waiting for turns (a developer's figure)

    def _depth(self) -> int:
        return int(getattr(self._held, "depth", 0))

    @contextlib.contextmanager
    def _holding(self, asked: float) -> Iterator[None]:
        """The use lock, just taken (asked for at `asked`): its wait counted, the turn marked as
        this thread's, and the lock let go at the end."""
        self.waited_s += time.perf_counter() - asked
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            fcntl.flock(self._use, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """GPU work that may run beside other processes' (not beside a timed launch)."""
        if self._depth():
            yield
            return
        asked = time.perf_counter()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._use, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        with self._holding(asked):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Timed launches: the GPU to this process alone."""
        if self._depth():
            raise RuntimeError("an exclusive GPU turn asked for inside a turn held")
        asked = time.perf_counter()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._use, fcntl.LOCK_EX)
            with self._holding(asked):
                yield
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._gate)
        os.close(self._use)


# The worker's turns on its GPU (set by runner/worker.py); None: no turns taken (tests, tools).
ACTIVE: GpuTurns | None = None


def shared() -> contextlib.AbstractContextManager[None]:
    return ACTIVE.shared() if ACTIVE is not None else contextlib.nullcontext()


def exclusive() -> contextlib.AbstractContextManager[None]:
    return ACTIVE.exclusive() if ACTIVE is not None else contextlib.nullcontext()


def device_key(info: dict, fake: bool) -> str:
    """Which GPU the turns are for: its PCI domain, bus and slot, the same for every process
    whatever CUDA_VISIBLE_DEVICES each has (by the bus alone, two GPUs that a VM puts on one bus
    would be one GPU, and on bus 0 both Ray actors' `dev0`: their timed launches would take
    turns). A fake GPU, or one with no PCI place: its index among all devices, through
    CUDA_VISIBLE_DEVICES (every Ray actor's GPU is its device 0: on fake GPUs, two actors took
    turns as if on one)."""
    if fake:
        return f"fake{_visible_index(int(info.get('index', 0)))}"
    place = [int(info.get(k) or 0) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not any(place):  # unknown: the index among all devices (each Ray actor's GPU is its device 0)
        return f"dev{_visible_index(int(info.get('index', 0)))}"
    if not place[0] and not place[2]:
        return f"pci{place[1]}"  # the bus alone (an older worker's description)
    return "pci{}-{}-{}".format(*place)


def _visible_index(index: int) -> int:
    """`index` among all the machine's devices, through CUDA_VISIBLE_DEVICES where it names them
    by number (as Ray does for each actor)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return int(visible[index]) if index < len(visible) and visible[index].isdigit() else index
