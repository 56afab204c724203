"""GPU verification for `kernel-lsp --check`: every file that compiled and has a spec sidecar is
compiled for the device, verified and timed on the GPU (through the Workspace); the findings join
the file's diagnostics. With several GPUs (`--gpus all|N`, `gpu.devices`) the files are spread over
them, one session per GPU (a local GPU or a Ray actor's, `evaluation.backend`), and each progress
line says which GPU did the file."""

from __future__ import annotations

import os
import sys

from .check import FileCheck
from .evaluation.pool import BackendPool
from .gpu import GpuSession, no_gpu_message
from .spec import spec_path_for
from .workspace import Workspace, gpu_label


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def verify_file(workspace: Workspace, gpu: GpuSession, c: FileCheck, profile: bool = False) -> None:
    """Compile `c`'s file for this GPU, check every spec'd kernel, add the findings to `c`."""
    verification = workspace.verify(gpu, c.path)
    if verification.artifact is None:  # gone or changed since the compile check
        return
    c.gpu_checks = verification.checks
    if profile:
        workspace.profile(gpu, verification)
    for k in c.gpu_checks:
        c.diagnostics.extend(k.diagnostics)


def awaiting_gpu(checks: list[FileCheck]) -> list[FileCheck]:
    """The files whose spec'd kernels a GPU would verify: compiled cleanly and have a spec."""
    return [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]


def mark_unverified(checks: list[FileCheck], reason: str) -> None:
    """Say on each file that has a spec that its kernels were not verified, and why, so that a
    compile-only run is never mistaken for a verified one."""
    for c in awaiting_gpu(checks):
        c.unverified = reason


def verify_checks(
    checks: list[FileCheck],
    workspace: Workspace,
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
    sessions, reason = workspace.open_gpus(gpus, log)
    if not sessions:
        log(f"kernel-lsp: GPU verification skipped: {no_gpu_message(reason)}")
        mark_unverified(todo, no_gpu_message(reason))
        return None
    pool = BackendPool(sessions)
    try:

        def verify(gpu: GpuSession, c: FileCheck) -> None:
            verify_file(workspace, gpu, c, profile)

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
