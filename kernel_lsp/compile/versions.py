"""Which CUDA a check used: NVRTC's version (asked of the library loaded in this process) and the
nvcc's (`nvcc --version` of the nvcc `find_toolchain` picks: CUDA_HOME/CUDA_PATH, the wheel, PATH).

A report names both because they can differ (CUDA_HOME pointing at a CUDA 12 toolkit while the
NVRTC wheel is CUDA 13), and a finding depends on which compiler and headers produced it.
"""

from __future__ import annotations

import functools
import re
import subprocess

from ..model import CudaVersions
from .stamped import by_stamp
from .toolchain import find_toolchain

# `Cuda compilation tools, release 13.5, V13.5.37`
_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)")
# nvcc --version prints at once; a wrapper that hangs must not hold a report up.
_VERSION_TIMEOUT_S = 10.0


@functools.cache
def nvrtc_version() -> str:
    """`13.5`, or why NVRTC could not be asked ("unavailable (...)")."""
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception as e:  # the wheel missing, or its library not loadable
        return f"unavailable ({e})"


@by_stamp(maxsize=8, missing=None)
def nvcc_version(nvcc: str) -> str | None:
    """`13.5.37` for this nvcc, or None when it cannot say (asked again once a toolkit is
    installed over it)."""
    try:
        out = subprocess.run(
            [nvcc, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT_S,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = _NVCC_RELEASE.search(out)
    return found.group(2) if found else None


def cuda_versions() -> CudaVersions:
    """The NVRTC and nvcc a check in this environment compiles with. Never raises."""
    nvrtc = nvrtc_version()
    toolchain = find_toolchain()
    return CudaVersions(
        nvrtc=None if nvrtc.startswith("unavailable") else nvrtc,
        nvcc=nvcc_version(toolchain.nvcc) if toolchain.nvcc else None,
        nvcc_path=toolchain.nvcc,
        nvcc_from=toolchain.nvcc_from,
        nvcc_problem=toolchain.misconfigured,
    )
