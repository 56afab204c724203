"""What the server's compile workers run: one file's check (the full one, or the front end's
first look), stoppable through a cancel token, returned lean.

A module of its own so that a worker imports only the engine it needs (not the server, nor the
spec machinery with numpy until a file has a spec): each worker is a process of its own, and
what it imports it holds for its life.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .check import FileCheck, Includer
from .compile.cancel import cancel_scope
from .compile.compile_commands import Lookup
from .compile.jobs import WorkerPool
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


def analyze_for_gpu(
    workspace: Workspace,
    path: str,
    text: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
    gpu_arch: str | None = None,
) -> tuple[FileCheck, Prebuilt | None]:
    """`lean_analyze`, and for a file that compiled cleanly and has a spec, its compile for
    `gpu_arch` (what `Workspace.verify` would compile in the GPU phase, one file after another),
    made here in parallel with the other files' checks."""
    check = workspace.analyze(path, text, spec_text, includers, project)
    prebuilt = None
    if gpu_arch and text is None and check.checked and not check.errors:
        prebuilt = prebuild(workspace, path, gpu_arch)
    return lean(check), prebuilt


class _Arch:
    """What `Workspace.device_options` reads of a device: its arch."""

    def __init__(self, arch: str):
        self.arch = arch


def prebuild(workspace: Workspace, path: str, arch: str) -> Prebuilt | None:
    """`path` compiled as `Workspace.verify` compiles it for a device of `arch` (None: no spec,
    an entry spec's library, or a compile that failed: the GPU phase does it as before)."""
    from .compile import compile_source, read_source
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


def check_stream(
    workspace: Workspace,
    files: list[str],
    jobs: int,
    gpu_arch: str | None = None,
) -> Iterator[tuple[int, FileCheck | Any, Prebuilt | None]]:
    """Each file's check in a worker process under its deadline and memory limit, yielded as
    each finishes: (index in `files`, the FileCheck or a JobFailed, its Prebuilt for `gpu_arch`).
    The worker processes are forked before this yields anything (no thread of the caller's
    started yet is copied into them)."""
    from .check import includers_for, job_deadline
    from .compile.jobs import JobFailed

    settings = workspace.settings
    # A header that does not compile alone is checked as the file that includes it sees it.
    context = includers_for(files, settings)
    # The database flags here, before the workers fork: they inherit the database read once.
    args = [
        (
            workspace,
            f,
            None,
            None,
            context.get(f, ()),
            workspace.settings_for(f).project_flags(f, workspace.root),
            gpu_arch,
        )
        for f in files
    ]
    if not files:
        return
    pool = WorkerPool(min(jobs, len(files)) or 1)
    try:
        deadline, memory = job_deadline(settings), settings.compile_memory_bytes
        checks = {pool.submit(analyze_for_gpu, a, deadline, memory): i for i, a in enumerate(args)}
        libraries: dict[Future, tuple[int, FileCheck, Prebuilt]] = {}
        waiting = set(checks)
        while waiting:
            finished, waiting = wait(waiting, return_when=FIRST_COMPLETED)
            for future in finished:
                result = future.result()
                if future in libraries:  # a library job: its file is ready for the GPU
                    i, check, prebuilt = libraries.pop(future)
                    yield i, check, result if isinstance(result, Prebuilt) else prebuilt
                elif isinstance(result, JobFailed):
                    yield checks[future], result, None
                elif result[1] is not None and result[1].entries:
                    job = pool.submit(prebuild_library, (result[1], files[checks[future]]), deadline, memory)
                    libraries[job] = (checks[future], result[0], result[1])
                    waiting.add(job)
                else:
                    yield checks[future], result[0], result[1]
    finally:
        pool.close()


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
