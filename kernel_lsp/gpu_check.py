"""GPU verification for `kernel-lsp --check`: every file that compiled and has a spec sidecar is
verified and timed on the GPU; the findings join the file's diagnostics."""

from __future__ import annotations

import os

from .check import FileCheck
from .config import Settings
from .gpu import GpuSession, check_file, no_gpu_message
from .spec import spec_path_for


def verify_checks(
    checks: list[FileCheck], settings: Settings, log=print, profile: bool = False
) -> str | None:
    """Verify in place; returns the device description, or None with the reason logged."""
    todo = [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]
    if not todo:
        return None
    with GpuSession(device=settings.gpu_device) as gpu:
        if not gpu.available:
            log(f"kernel-lsp: GPU verification skipped: {no_gpu_message(gpu.reason)}")
            return None
        for c in todo:
            options = settings.compile_options(gpu.device.arch if gpu.device else settings.archs()[0])
            c.gpu_checks = check_file(gpu, c.path, compile_options=options)
            if profile:
                with open(c.path, encoding="utf-8") as f:
                    source = f.read()
                for k in c.gpu_checks:
                    gpu.add_occupancy(k, source, c.path, None, options)
            for k in c.gpu_checks:
                c.diagnostics.extend(k.diagnostics)
        d = gpu.device
        return d.name if d else None
