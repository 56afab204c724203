"""GPU verification for `kernel-lsp --check`: every file that compiled and has a spec sidecar is
compiled for the device, verified and timed on the GPU; the findings join the file's
diagnostics. With several GPUs (`--gpus all|N`, `gpu.devices`) the files are spread over them,
one session per GPU (a local GPU or a Ray actor's, `evaluation.backend`), and each progress line
says which GPU did the file."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from .check import FileCheck
from .compile import read_source
from .config import Settings
from .evaluation.choose import open_backends
from .evaluation.pool import BackendPool
from .gpu import GpuSession, check_file, no_gpu_message
from .spec import spec_path_for


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def verify_file(gpu: GpuSession, c: FileCheck, settings: Settings, profile: bool = False) -> None:
    """Compile `c`'s file for this GPU, check every spec'd kernel, add the findings to `c`."""
    # The project's flags (compile_commands.json) too: its headers and defines.
    project = settings.project_flags(c.path).flags
    arch = gpu.device.arch if gpu.device else settings.archs(project)[0]
    options = settings.compile_options(arch, None, project)
    # The text the compile check read (BOM dropped, bytes that are not UTF-8 as "?").
    source, _ = read_source(c.path, settings.max_file_bytes)
    if source is None:  # gone or changed since the compile check
        return
    artifact = gpu.compile(source, c.path, options)
    c.gpu_checks = check_file(gpu, c.path, source, options, artifact=artifact)
    if profile:
        for k in c.gpu_checks:
            gpu.add_occupancy(k, source, c.path, None, artifact, defines=options.defines)
    for k in c.gpu_checks:
        c.diagnostics.extend(k.diagnostics)


def open_sessions(
    settings: Settings, gpus: str | None = None, log=print, **backend_options: Any
) -> tuple[list[GpuSession], str]:
    """A session per GPU that answers, on the backend the settings choose (local GPUs or Ray
    actors), and the reason when none does; the others are closed with their reason logged.
    Raises RayUnavailable when Ray was asked for explicitly and cannot serve."""
    backends = open_backends(
        settings.evaluation_backend,
        gpus if gpus is not None else settings.gpu_devices,
        settings.gpu_device,
        settings.cluster_address,
        log,
        **backend_options,
    )
    usable, reason = [], ""
    for s in (GpuSession(backend=b) for b in backends):
        if s.available:
            usable.append(s)
            continue
        reason = reason or s.reason
        if len(backends) > 1:
            log(f"kernel-lsp: {gpu_label(s)} skipped: {no_gpu_message(s.reason)}")
        s.close()
    return usable, reason


def awaiting_gpu(checks: list[FileCheck]) -> list[FileCheck]:
    """The files whose spec'd kernels a GPU would verify: compiled cleanly and have a spec."""
    return [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]


def mark_unverified(checks: list[FileCheck], reason: str) -> None:
    """Say on each file that has a spec that its kernels were not verified, and why, so that a
    compile-only run is never mistaken for a verified one."""
    for c in awaiting_gpu(checks):
        c.unverified = reason


def gpu_label(gpu: GpuSession) -> str:
    """`GPU 1` on this machine, `node-7 GPU 1` on another node of a cluster."""
    return (
        f"GPU {gpu.device_index}"
        if gpu.host in ("", socket.gethostname())
        else f"{gpu.host} GPU {gpu.device_index}"
    )


def verify_checks(
    checks: list[FileCheck],
    settings: Settings,
    log=print,
    profile: bool = False,
    gpus: str | None = None,
    progress=_stderr,
) -> str | None:
    """Verify in place; returns the device description, or None with the reason logged (and
    kept on each file that went unverified)."""
    todo = awaiting_gpu(checks)
    if not todo:
        return None
    sessions, reason = open_sessions(settings, gpus, log)
    if not sessions:
        log(f"kernel-lsp: GPU verification skipped: {no_gpu_message(reason)}")
        mark_unverified(todo, no_gpu_message(reason))
        return None
    pool = BackendPool(sessions)
    try:

        def verify(gpu: GpuSession, c: FileCheck) -> None:
            verify_file(gpu, c, settings, profile)

        def done(c: FileCheck, _result: None, gpu: GpuSession) -> None:
            if len(pool) > 1:
                verdicts = ", ".join(f"{k.kernel or '?'} {k.status}" for k in c.gpu_checks) or "no kernels"
                progress(f"kernel-lsp: {gpu_label(gpu)}: {os.path.relpath(c.path)}: {verdicts}")

        pool.map(verify, todo, done)
        names = sorted({s.device.name for s in sessions if s.device})
        if not names:
            return None
        return names[0] if len(sessions) == 1 else f"{len(sessions)} GPUs ({', '.join(names)})"
    finally:
        pool.close()
