"""GPU verification for `kernel-lsp --check`: every file that compiled and has a spec sidecar is
verified and timed on the GPU; the findings join the file's diagnostics."""

from __future__ import annotations

import os

from .check import FileCheck
from .compile import read_source
from .config import Settings
from .gpu import GpuSession, check_file
from .spec import spec_path_for


def awaiting_gpu(checks: list[FileCheck]) -> list[FileCheck]:
    """The files whose spec'd kernels a GPU would verify: compiled cleanly and have a spec."""
    return [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]


def mark_unverified(checks: list[FileCheck], reason: str) -> None:
    """Say on each file that has a spec that its kernels were not verified, and why, so that a
    compile-only run is never mistaken for a verified one."""
    for c in awaiting_gpu(checks):
        c.unverified = reason


def verify_checks(
    checks: list[FileCheck], settings: Settings, log=print, profile: bool = False
) -> str | None:
    """Verify in place; returns the device description, or None with the reason logged (and
    kept on each file that went unverified)."""
    todo = awaiting_gpu(checks)
    if not todo:
        return None
    with GpuSession(device=settings.gpu_device) as gpu:
        if not gpu.available:
            log(f"kernel-lsp: GPU verification skipped: {gpu.reason}")
            mark_unverified(todo, gpu.reason or "no GPU")
            return None
        for c in todo:
            options = settings.compile_options(gpu.device.arch if gpu.device else settings.archs()[0])
            # The text the compile check read (BOM dropped, bytes that are not UTF-8 as "?").
            source, _ = read_source(c.path, settings.max_file_bytes)
            if source is None:  # gone or changed since the compile check
                continue
            c.gpu_checks = check_file(gpu, c.path, source=source, compile_options=options)
            if profile:
                for k in c.gpu_checks:
                    gpu.add_occupancy(k, source, c.path, None, options)
            for k in c.gpu_checks:
                c.diagnostics.extend(k.diagnostics)
        d = gpu.device
        return d.name if d else None
