"""What the server's compile workers run: one file's check (the full one, or the front end's
first look), stoppable through a cancel token, returned lean.

A module of its own so that a worker imports only the engine it needs (not the server, nor the
spec machinery with numpy until a file has a spec): each worker is a process of its own, and
what it imports it holds for its life.
"""

from __future__ import annotations

import os
from dataclasses import replace

from .check import FileCheck, Includer
from .compile.cancel import cancel_scope
from .compile.compile_commands import Lookup
from .workspace import CheckRequest, Workspace

# Memory per worker: the Python process with the engine (~25 MB), NVRTC once loaded (~80 MB of
# library, shared between workers but counted in each one's RSS).
WORKER_MIB = 130


def check_job(request: CheckRequest, workspace: Workspace) -> FileCheck:
    with cancel_scope(request.cancel_token):
        return lean(workspace.check(request))


def front_end_job(request: CheckRequest, workspace: Workspace) -> FileCheck | None:
    """The first phase of an nvcc file's check (None: nothing quicker than the full check)."""
    with cancel_scope(request.cancel_token):
        check = workspace.first_look_at(request)
    return lean(check) if check is not None else None


def lean_analyze(
    workspace: Workspace,
    path: str,
    text: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck:
    """`Workspace.analyze` for `--check`'s workers: what it prints, not the CUBINs (GPU
    verification compiles for the device's arch anyway)."""
    return lean(workspace.analyze(path, text, spec_text, includers, project))


def lean(check: FileCheck) -> FileCheck:
    """The check without the CUBINs and compiler logs: the server shows findings and resources,
    and compiles again for the GPU's own arch when it verifies. A CUB-heavy file's CUBIN is MBs,
    copied through a pipe and kept for every checked file otherwise."""
    check.results = [replace(r, cubin=None, log="") for r in check.results]
    return check


def warm_up(nvrtc: bool = False) -> None:
    """Import the engine in a worker before the first real file arrives; load NVRTC too when the
    project is known to use it (a worker that only runs nvcc never needs its ~80 MB)."""
    if nvrtc:
        from .compile import CompileOptions, compile_source

        compile_source("", "warmup.cu", CompileOptions(), use_cache=False)


def default_workers() -> int:
    """Compile workers for this machine: one per core, at most 4, and no more than a quarter of
    the memory available now holds (a worker with NVRTC loaded is ~130 MB)."""
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        available_mib = int(fields["MemAvailable"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        available_mib = 0
    by_memory = available_mib // (4 * WORKER_MIB) if available_mib else 4
    return max(1, min(4, cores, by_memory))
