"""Where nvcc and its host compiler come from, and what to install when one is missing.

nvcc: `CUDA_HOME`/`CUDA_PATH` when set (the user points at a toolkit), else NVIDIA's pip wheel
(`nvidia-cuda-nvcc`), else `nvcc` on PATH. A `CUDA_HOME` (or `CUDA_PATH`) without an executable
`bin/nvcc` is a problem that says so, never a fall back to another nvcc: the user asked for that
toolkit (a CUDA 12 one, say), and the wheel's CUDA 13 would answer for it unnoticed.
Host compiler: `-ccbin` in the extra flags, else `CXX`, else `g++` on PATH (nvcc's own default on
Linux).
"""

from __future__ import annotations

import os
import shutil
import site
import sysconfig
from dataclasses import dataclass

INSTALL_NVCC = "pip install nvidia-cuda-nvcc nvidia-cuda-crt"
INSTALL_GXX = "a C++ host compiler (`apt install g++`, `dnf install gcc-c++`) or set CXX"


@dataclass(frozen=True)
class Toolchain:
    nvcc: str | None
    host_compiler: str | None
    nvcc_from: str = ""  # "CUDA_HOME", "wheel", "PATH": said in messages
    # Why the toolkit the environment names cannot be used (no nvcc there); nvcc is then None.
    misconfigured: str | None = None

    @property
    def problem(self) -> str | None:
        """What is missing for nvcc to compile host+device text, with what to install."""
        if self.misconfigured:
            return self.misconfigured
        if self.nvcc is None:
            return f"no nvcc found (looked in CUDA_HOME/CUDA_PATH, the nvidia-cuda-nvcc wheel, PATH); install it: `{INSTALL_NVCC}`"
        if self.host_compiler is None:
            if os.environ.get("CXX"):
                return f"nvcc needs a host compiler and CXX={os.environ['CXX']} was not found; fix CXX or install {INSTALL_GXX}"
            return f"nvcc ({self.nvcc}) needs a host compiler and none was found; install {INSTALL_GXX}"
        return None


def _toolkit_nvcc() -> tuple[str | None, str | None]:
    """(the nvcc of the toolkit CUDA_HOME, else CUDA_PATH, names; why that folder has none). The
    first of the two that is set decides, as it does for PyTorch's and CMake's lookups."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            candidate = os.path.join(root, "bin", "nvcc")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate, None
            what = "is no folder" if not os.path.isdir(root) else f"has no executable {candidate}"
            return None, (
                f"{var}={root} {what}: point {var} at a CUDA toolkit's root (the folder holding "
                f"bin/nvcc), or unset it to use the nvidia-cuda-nvcc wheel"
            )
    return None, None


def _wheel_nvcc() -> str | None:
    """The nvcc of the nvidia-cuda-nvcc wheel, found through the installed `nvidia` package."""
    try:
        import nvidia  # namespace package of NVIDIA's wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for version_dir in sorted(os.listdir(root), reverse=True) if os.path.isdir(root) else []:
            candidate = os.path.join(root, version_dir, "bin", "nvcc")
            if version_dir.startswith("cu") and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def site_packages() -> list[str]:
    """This interpreter's site-packages folders, where pip puts NVIDIA's wheels (never the current
    folder nor PYTHONPATH: a repository cannot plant a folder there)."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"], *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def _split_ccbin(extra: tuple[str, ...]) -> str | None:
    for i, flag in enumerate(extra):
        for prefix in ("-ccbin=", "--compiler-bindir="):
            if flag.startswith(prefix):
                return flag[len(prefix) :]
        if flag in ("-ccbin", "--compiler-bindir") and i + 1 < len(extra):
            return extra[i + 1]
    return None


def find_toolchain(extra: tuple[str, ...] = ()) -> Toolchain:
    """Looked up on each call (cheap: a few stats), so a tool installed while the server runs is used."""
    (nvcc, misconfigured), where = _toolkit_nvcc(), "CUDA_HOME"
    if nvcc is None and misconfigured is None:
        nvcc, where = _wheel_nvcc(), "wheel"
    if nvcc is None and misconfigured is None:
        nvcc, where = shutil.which("nvcc"), "PATH"
    ccbin = _split_ccbin(extra)
    if ccbin:
        host = ccbin if os.path.exists(ccbin) else shutil.which(ccbin)
    elif os.environ.get("CXX"):
        host = shutil.which(os.environ["CXX"])
    else:
        host = shutil.which("g++")
    return Toolchain(nvcc, host, where if nvcc else "", misconfigured)
