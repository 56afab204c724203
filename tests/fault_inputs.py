"""Inputs that broke kernel-lsp before issue 23 (shared by the fault tests and
benchmarks/faults.py), and a look at a process tree."""

from __future__ import annotations

import os
import time

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"

# A NUL after the first 8 KiB, then an error: NVRTC stops reading at the NUL (a false clean).
NUL_LINE = 2002
NUL_AFTER_8K = KERNEL.encode() + b"// padding\n" * 2000 + b"\x00\nint bad = ;\n"

# A macro that doubles 26 times: the front end works for minutes (a slow file, no spec).
MACRO_BOMB = (
    "#define A0 x\n"
    + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 28))
    + "__global__ void k(float* x) { int z = sizeof((A26)); }\n"
)

# A 1 GiB initialised device array: NVVM allocates all of it (past 8 GB unbounded); under a
# 512 MiB limit it stops in about a second with "LLVM ERROR: out of memory".
MEMORY_BOMB = "__device__ char a[1u << 30] = {1};\n__global__ void k(char* x) { x[threadIdx.x] = a[threadIdx.x * 4096]; }\n"

# A spec that starts a process of its own and never returns: its `sleep` must end with kernel-lsp.
SLEEPING_SPEC = """\
import os, subprocess, time
child = subprocess.Popen(["sleep", "300"])
with open(os.path.join(os.path.dirname(__file__), "sleep.pid"), "w") as f:
    f.write(str(child.pid))
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, their children...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    """The ones still alive after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def sleep_in_phase(phase: str, seconds: float) -> None:
    """A job for a WorkerPool: says it is in `phase`, then sleeps (a spec that never returns)."""
    from kernel_lsp.compile.jobs import report_phase

    report_phase(phase)
    time.sleep(seconds)
