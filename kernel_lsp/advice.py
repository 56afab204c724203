"""Advice that names a setting. The engine words it for the command line (flags and
`[tool.kernel-lsp]`); the language server swaps in the editor's setting at its edge
(`server/convert.py`), so each front end names what its user can change."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_DEVICE = "pass --default-device (or `default-device = true` under [tool.kernel-lsp])"
INCLUDE_DIRS = "add its folder with -I/--include DIR (or `include = [...]` under [tool.kernel-lsp])"

_IN_EDITOR = {
    DEFAULT_DEVICE: "turn on the kernelLsp.defaultDevice setting",
    INCLUDE_DIRS: "add its folder to the kernelLsp.includeDirs setting",
}


def for_editor(message: str) -> str:
    for cli, editor in _IN_EDITOR.items():
        message = message.replace(cli, editor)
    return message


@dataclass(frozen=True)
class NvidiaLibrary:
    """An NVIDIA library whose headers a pip wheel holds (names checked on PyPI with `pip index
    versions`, folders read from the wheels' file lists)."""

    name: str
    package: str  # CUDA 13's wheel
    package_cu12: str  # CUDA 12's wheel
    # Where each wheel puts the headers, under site-packages. CUDA 13's cuBLAS, cuFFT, cuRAND,
    # cuSPARSE, cuSOLVER and NVTX share the CUDA headers' folder (the nvcc and NVRTC wheels'), so
    # installing them is enough; the others need an include folder.
    folder: str
    folder_cu12: str

    def wheel(self, cuda_major: int | None) -> tuple[str, str]:
        """(package, header folder) for this CUDA major version (13 when unknown)."""
        if cuda_major == 12:
            return self.package_cu12, self.folder_cu12
        return self.package, self.folder


CUDA_HEADERS_FOLDER = "nvidia/cu13/include"


def _in_cuda_folder(name: str, stem: str) -> NvidiaLibrary:
    return NvidiaLibrary(
        name, f"nvidia-{stem}", f"nvidia-{stem}-cu12", CUDA_HEADERS_FOLDER, f"nvidia/{stem}/include"
    )


# (how an #include names a header of the library, the library)
_LIBRARIES: tuple[tuple[re.Pattern[str], NvidiaLibrary], ...] = (
    (re.compile(r"(cublas(Lt|Xt|_api|_v2)?|nvblas)\.h"), _in_cuda_folder("cuBLAS", "cublas")),
    (re.compile(r"(cufft(Xt|w|_device)?|cudalibxt)\.h"), _in_cuda_folder("cuFFT", "cufft")),
    (re.compile(r"curand(_\w+)?\.h"), _in_cuda_folder("cuRAND", "curand")),
    (re.compile(r"cusparse(_v2)?\.h"), _in_cuda_folder("cuSPARSE", "cusparse")),
    (
        re.compile(r"cusolver(Dn|Mg|Rf|Sp|_common|Sp_LOWLEVEL_PREVIEW)\.h"),
        _in_cuda_folder("cuSOLVER", "cusolver"),
    ),
    (re.compile(r"nvtx3/.+\.(h|hpp)"), _in_cuda_folder("NVTX", "nvtx")),
    (
        re.compile(r"cudnn(_\w+)?\.h"),
        NvidiaLibrary(
            "cuDNN", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia/cudnn/include", "nvidia/cudnn/include"
        ),
    ),
    (
        re.compile(r"nccl(_device\w*)?\.h"),
        NvidiaLibrary(
            "NCCL", "nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia/nccl/include", "nvidia/nccl/include"
        ),
    ),
    (  # CUTLASS's utilities (host tensors, reference kernels) have a folder of their own
        re.compile(r"cutlass/util/.+\.(h|hpp)"),
        NvidiaLibrary(
            "CUTLASS",
            "nvidia-cutlass",
            "nvidia-cutlass",
            "cutlass_library/source/tools/util/include",
            "cutlass_library/source/tools/util/include",
        ),
    ),
    (
        re.compile(r"(cutlass|cute)/.+\.(h|hpp)"),
        NvidiaLibrary(
            "CUTLASS",
            "nvidia-cutlass",
            "nvidia-cutlass",
            "cutlass_library/source/include",
            "cutlass_library/source/include",
        ),
    ),
)


def nvidia_library(header: str) -> NvidiaLibrary | None:
    """The NVIDIA library an `#include` names (`cublas_v2.h`, `nvtx3/nvToolsExt.h`,
    `cutlass/gemm/device/gemm.h`), or None."""
    header = header.strip().removeprefix("./")
    return next((lib for pattern, lib in _LIBRARIES if pattern.fullmatch(header)), None)


def missing_package(header: str, cuda_major: int | None, installed_in: str | None) -> str:
    """The pip package to install for a missing NVIDIA library header, "" when installing is not
    the fix (not a library's header, or installed and only not on the include path)."""
    library = nvidia_library(header)
    return library.wheel(cuda_major)[0] if library is not None and not installed_in else ""


def library_advice(
    header: str, cuda_major: int | None, installed_in: str | None, site: str = "site-packages"
) -> str | None:
    """What to do about a missing NVIDIA library header: the pip package to install (for the CUDA
    major version that compiled), and the include folder (under `site`, where pip puts it) when
    its wheel puts it outside the CUDA headers' folder; or, when it is installed (`installed_in`),
    that folder. None for other headers."""
    library = nvidia_library(header)
    if library is None:
        return None
    package, folder = library.wheel(cuda_major)
    if installed_in:
        return f"`{header}` is {library.name}'s, installed in {installed_in}: {INCLUDE_DIRS}"
    advice = f"`{header}` is {library.name}'s: install it: pip install {package}"
    if folder != CUDA_HEADERS_FOLDER:
        advice += f"; then {INCLUDE_DIRS}: {site}/{folder}"
    return advice
