"""What the server's compile workers run: one file's check (the full one, or the front end's
first look), stoppable through a cancel token, returned lean.

A module of its own so that a worker imports only the engine it needs (not the server, nor the
spec machinery with numpy until a file has a spec): each worker is a process of its own, and
what it imports it holds for its life.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .check import FileCheck
from .compile.cancel import cancel_scope
from .procs import memory_available
from .workspace import CheckRequest, Workspace

if TYPE_CHECKING:
    from .compile import CompileOptions
    from .compile.shared_lib import LibraryBuild
    from .model import CompileResult

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


@dataclass
class Prebuilt:
    """A spec'd file compiled for the GPU's arch in its check worker, beside the resource compile
    (whose in-process cache answers it when the options are the same): the text it compiled and
    the options, so that verification reuses it only for the same text and options."""

    text: str
    options: CompileOptions
    artifact: CompileResult | None  # its log dropped
    entries: bool = False  # its spec has entry specs: they run the file as a shared library
    library: LibraryBuild | None = None  # for them, built by a job of its own (`prebuild_library`)


def files_job(request: CheckRequest, workspace: Workspace) -> tuple[FileCheck, Prebuilt | None]:
    """A `kernel-lsp check` run's file (`check_job`), and for one that compiled cleanly and has
    a spec, its compile for `request.gpu_arch` (what `Workspace.verify` would compile in the GPU
    phase, one file after another), made here in parallel with the other files' checks."""
    with cancel_scope(request.cancel_token):
        check = workspace.check(request)
        prebuilt = None
        if request.gpu_arch and request.text is None and check.checked and not check.errors:
            prebuilt = prebuild(workspace, request.path, request.gpu_arch)
    return lean(check), prebuilt


class _Arch:
    """What `Workspace.device_options` reads of a device: its arch."""

    def __init__(self, arch: str):
        self.arch = arch


def prebuild(workspace: Workspace, path: str, arch: str) -> Prebuilt | None:
    """`path` compiled as `Workspace.verify` compiles it for a device of `arch` (None: no spec,
    an entry spec's library, or a compile that failed: the GPU phase does it as before)."""
    from .compile import compile_source
    from .files import read_source
    from .spec import spec_path_for

    if not os.path.exists(spec_path_for(path)):
        return None
    source, _ = read_source(path, workspace.settings_for(path).max_file_bytes)
    if source is None:
        return None
    options = workspace.device_options(path, _Arch(arch), source)
    result = compile_source(source, path, options)
    if not result.ok or result.cubin is None:
        return None
    return Prebuilt(source, options, replace(result, log=""), _has_entries(path))


def _has_entries(path: str) -> bool:
    """Whether the spec beside `path` has an entry spec (read here, in the check's worker, as
    the check itself read it)."""
    from .spec import load_specs, spec_path_for

    try:
        return any(s.is_entry for s in load_specs(spec_path_for(path)).specs)
    except Exception:
        return False


def prebuild_library(prebuilt: Prebuilt, path: str) -> Prebuilt:
    """`prebuilt` with the shared library its entry specs run, built as `GpuSession.
    build_library` builds it (compile_library with the fence, the same options), in a check
    worker while other files are checked and verified."""
    from .gpu import _build_library

    prebuilt.library = _build_library(prebuilt.text, path, prebuilt.options, None)
    return prebuilt


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
    available_mib = memory_available() >> 20
    by_memory = available_mib // (4 * WORKER_MIB) if available_mib else 4
    return max(1, min(4, cores, by_memory))
