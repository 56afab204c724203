"""What a compile is asked to do (arch, include folders, defines), independent of the backend,
and where the CUDA headers and the local GPU's arch come from."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace

FALLBACK_ARCH = "sm_90"


COMPILERS = ("auto", "nvrtc", "nvcc")


@dataclass(frozen=True)
class CompileOptions:
    """Backend-neutral: each backend turns these into its own flags."""

    arch: str = FALLBACK_ARCH
    include_dirs: tuple[str, ...] = ()
    system_include_dirs: tuple[str, ...] = ()  # -isystem (compile_commands.json, torch)
    defines: tuple[str, ...] = ()  # "NAME=value" or "NAME" -> -D
    undefines: tuple[str, ...] = ()  # -U
    default_device: bool = False
    relaxed_constexpr: bool = False  # --expt-relaxed-constexpr
    extended_lambda: bool = False  # --extended-lambda
    extra: tuple[str, ...] = ()  # more flags for the backend, passed as they are
    std: str = "c++17"
    # "auto": NVRTC for device-only text, nvcc for text with host code.
    compiler: str = "auto"
    # With nvcc: also compile the host side (`nvcc -c`), so the host compiler's own errors show.
    host_check: bool = False
    # nvcc's time limit in seconds (None: KERNEL_LSP_NVCC_TIMEOUT_S or 60). Not part of what a
    # result means: equal options and cache keys whatever it is (a result that ran out of time
    # is never cached).
    timeout_s: float | None = field(default=None, compare=False, repr=False)

    def with_arch(self, arch: str) -> CompileOptions:
        return replace(self, arch=arch)


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The cudart and cccl header folders of NVIDIA's pip wheels (NVRTC adds none by itself)."""
    try:
        from cuda import pathfinder
    except ImportError:
        return ()
    dirs = []
    for lib in ("cudart", "cccl"):
        try:
            d = pathfinder.find_nvidia_header_directory(lib)
        except Exception:  # pathfinder raises its own errors for missing wheels
            d = None
        if d:
            dirs.append(str(d))
    return tuple(dirs)


@functools.cache
def local_gpu_arch() -> str | None:
    """The compute capability of the first visible GPU, asked of nvidia-smi so the server never
    creates a CUDA context for it."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return None
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out:
        return None
    major, _, minor = out[0].partition(".")
    return f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None


def resolve_arch(arch: str | None) -> str:
    """ "auto" (or nothing) means the local GPU's arch, else sm_90."""
    if not arch or arch == "auto":
        return local_gpu_arch() or FALLBACK_ARCH
    return arch.strip()
