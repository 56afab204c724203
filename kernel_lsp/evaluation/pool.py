"""Several GPUs at once: one backend (or session over one) per device, and work spread over them.

`BackendPool.map` runs independent jobs (files of `--check`, candidates of an optimizer round)
on whichever device is free, keeping the results in the jobs' order. Anything that compares
timings (an A/B of a candidate and its baseline) is ONE job, so it runs on one device.
A backend whose worker died restarts it on its next job: a killed worker costs only its job.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from ..config import gpus_value

T = TypeVar("T")  # what the pool holds: a backend, or a GpuSession over one
J = TypeVar("J")
R = TypeVar("R")


def visible_gpu_count() -> int:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return len(entries)
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def parse_gpus(value: str | int | None, first: int | None = None) -> tuple[list[int], str | None]:
    """Device indices for `--gpus all|N` (or `gpu.devices`), and a problem when the value is not
    one. None: the one device `first` (default 0), as before."""
    start = 0 if first is None else first
    if value is None or value == "":
        return [start], None
    text = gpus_value(value)
    if text is None:
        return [start], f"--gpus takes `all` or a number of GPUs, not `{value}`"
    if text == "all":
        count = visible_gpu_count()
        return (list(range(count)) if count else [start]), None
    return list(range(start, start + int(text))), None


class BackendPool(Generic[T]):
    """Holds one member per device; each job borrows a free member for its whole run."""

    def __init__(self, members: Sequence[T]):
        if not members:
            raise ValueError("a pool needs at least one member")
        self.members = list(members)
        self._idle: queue.Queue[T] = queue.Queue()
        for m in self.members:
            self._idle.put(m)

    def __len__(self) -> int:
        return len(self.members)

    def add(self, member: T) -> None:
        """One more member, free for the next job (a lane opened after the first jobs began)."""
        self.members.append(member)
        self._idle.put(member)

    def run(self, job: Callable[[T], R]) -> R:
        """Run one job on the next free member (waiting for one)."""
        member = self._idle.get()
        try:
            return job(member)
        finally:
            self._idle.put(member)

    def map(
        self,
        job: Callable[[T, J], R],
        items: Iterable[J],
        on_done: Callable[[J, R, T], None] | None = None,
    ) -> list[R]:
        """job(member, item) for every item, as many at once as there are members; results in
        the items' order. `on_done(item, result, member)` is called as each finishes."""
        items = list(items)

        def one(item: J) -> R:
            member = self._idle.get()
            try:
                result = job(member, item)
                if on_done is not None:
                    on_done(item, result, member)
                return result
            finally:
                self._idle.put(member)

        if len(self.members) == 1 or len(items) <= 1:
            return [one(item) for item in items]
        with ThreadPoolExecutor(max_workers=len(self.members), thread_name_prefix="kernel-lsp-gpu") as ex:
            return list(ex.map(one, items))

    def close(self) -> None:
        for m in self.members:
            close = getattr(m, "close", None)
            if close is not None:
                close()
