"""A missing NVIDIA library header names the pip package that holds it (issue 33).

The package names were confirmed on PyPI (`pip index versions NAME`) and each wheel's header
folder read from its file list: CUDA 13's cuBLAS, cuFFT, cuRAND, cuSPARSE, cuSOLVER and NVTX put
theirs in `nvidia/cu13/include` (beside cuda_runtime.h: nothing to add), cuDNN and NCCL in
`nvidia/<lib>/include`, CUTLASS in `cutlass_library/source/include`, and every CUDA 12 wheel in
`nvidia/<lib>/include`."""

from __future__ import annotations

import stat

import pytest

from kernel_lsp.advice import for_editor, library_advice, nvidia_library
from kernel_lsp.compile import CompileOptions, artifact, compile_source, find_toolchain
from kernel_lsp.model import Severity

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")
HOST = "#include <cstdio>\n#include <{header}>\n__global__ void k(int* p) {{ *p = 1; }}\nint main() {{ return 0; }}\n"
DEVICE = '#include "{header}"\n__global__ void k(int* p) {{ *p = 1; }}\n'

# header as a project writes it -> (library, CUDA 13 package, CUDA 12 package)
KNOWN = {
    "cublas_v2.h": ("cuBLAS", "nvidia-cublas", "nvidia-cublas-cu12"),
    "cublasLt.h": ("cuBLAS", "nvidia-cublas", "nvidia-cublas-cu12"),
    "cufft.h": ("cuFFT", "nvidia-cufft", "nvidia-cufft-cu12"),
    "cufftXt.h": ("cuFFT", "nvidia-cufft", "nvidia-cufft-cu12"),
    "curand_kernel.h": ("cuRAND", "nvidia-curand", "nvidia-curand-cu12"),
    "cusparse.h": ("cuSPARSE", "nvidia-cusparse", "nvidia-cusparse-cu12"),
    "cusolverDn.h": ("cuSOLVER", "nvidia-cusolver", "nvidia-cusolver-cu12"),
    "nvtx3/nvToolsExt.h": ("NVTX", "nvidia-nvtx", "nvidia-nvtx-cu12"),
    "cudnn.h": ("cuDNN", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
    "nccl.h": ("NCCL", "nvidia-nccl-cu13", "nvidia-nccl-cu12"),
    "cutlass/gemm/device/gemm.h": ("CUTLASS", "nvidia-cutlass", "nvidia-cutlass"),
    "cute/tensor.hpp": ("CUTLASS", "nvidia-cutlass", "nvidia-cutlass"),
}


@pytest.mark.parametrize("header", sorted(KNOWN))
def test_each_library_header_names_its_package_for_cuda_13_and_12(header):
    name, cu13, cu12 = KNOWN[header]
    library = nvidia_library(header)
    assert library is not None and library.name == name
    assert f"is {name}'s: install it: pip install {cu13}" in (library_advice(header, 13, None) or "")
    assert f"install it: pip install {cu12}" in (library_advice(header, 12, None) or "")
    assert library_advice(header, None, None) == library_advice(header, 13, None)  # unknown: CUDA 13's


@pytest.mark.parametrize(
    "header", ["kernels.cuh", "my_cublas_wrapper.h", "cutlass_helpers.h", "nvtx.h", "thrust/sort.h"]
)
def test_other_headers_are_no_library(header):
    assert nvidia_library(header) is None and library_advice(header, 13, None) is None


def test_where_to_point_the_include_folder():
    # CUDA 13's cuBLAS lands beside the CUDA headers: installing is enough.
    assert "-I" not in (library_advice("cublas_v2.h", 13, None) or "")
    # Its CUDA 12 wheel, cuDNN and CUTLASS need their folder, named under site-packages.
    assert (library_advice("cublas_v2.h", 12, None, "/venv/site") or "").endswith(
        ": /venv/site/nvidia/cublas/include"
    )
    assert (library_advice("cudnn.h", 13, None, "/venv/site") or "").endswith(
        ": /venv/site/nvidia/cudnn/include"
    )
    assert (library_advice("cutlass/util/host_tensor.h", 13, None, "/s") or "").endswith(
        ": /s/cutlass_library/source/tools/util/include"
    )
    # The editor names its own setting.
    editor = for_editor(library_advice("nccl.h", 13, None, "/s") or "")
    assert "kernelLsp.includeDirs" in editor and "pip install nvidia-nccl-cu13" in editor


@needs_nvcc
def test_nvcc_missing_cublas_names_the_package(tmp_path):
    path = tmp_path / "blas.cu"
    path.write_text(HOST.format(header="cublas_v2.h"))
    result = compile_source(path.read_text(), str(path), CompileOptions(compiler="nvcc"), use_cache=False)
    (error,) = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert error.line == 2
    assert error.message.startswith("cublas_v2.h: No such file or directory")
    assert "`cublas_v2.h` is cuBLAS's: install it: pip install nvidia-cublas." in error.message


def test_nvrtc_missing_cutlass_names_the_package_and_its_folder(tmp_path):
    path = tmp_path / "gemm.cu"
    path.write_text(DEVICE.format(header="cutlass/cutlass.h"))
    result = compile_source(path.read_text(), str(path), CompileOptions(compiler="nvrtc"), use_cache=False)
    (error,) = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert 'cannot open source file "cutlass/cutlass.h"' in error.message
    assert "install it: pip install nvidia-cutlass; then add its folder with -I" in error.message
    assert error.message.endswith("cutlass_library/source/include.")


def test_an_installed_wheel_outside_the_search_path_is_named_and_the_advice_works(tmp_path, monkeypatch):
    """cuDNN's wheel installed (its headers in site-packages/nvidia/cudnn/include): the finding
    names that folder, and with it as an include folder the file compiles."""
    site = tmp_path / "site-packages"
    folder = site / "nvidia" / "cudnn" / "include"
    folder.mkdir(parents=True)
    (folder / "cudnn.h").write_text("#pragma once\ntypedef int cudnnStatus_t;\n")
    monkeypatch.setattr(artifact, "site_packages", lambda: [str(site)])
    path = tmp_path / "dnn.cu"
    path.write_text(DEVICE.format(header="cudnn.h").replace("*p = 1", "cudnnStatus_t s = 1; *p = s"))
    result = compile_source(path.read_text(), str(path), CompileOptions(compiler="nvrtc"), use_cache=False)
    (error,) = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert f"`cudnn.h` is cuDNN's, installed in {folder}: add its folder with -I" in error.message
    fixed = compile_source(
        path.read_text(),
        str(path),
        CompileOptions(compiler="nvrtc", include_dirs=(str(folder),)),
        use_cache=False,
    )
    assert fixed.ok, fixed.diagnostics


def test_a_cuda_12_nvcc_asks_for_the_cu12_wheel(tmp_path, monkeypatch):
    """The package follows the compiler that reported the missing header: an nvcc under CUDA_HOME
    that says 12.x asks for nvidia-cublas-cu12."""
    bin_dir = tmp_path / "cuda-12" / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-12"))
    assert artifact._cuda_major("nvcc", CompileOptions()) == 12
    monkeypatch.delenv("CUDA_HOME")
    assert artifact._cuda_major("nvrtc", CompileOptions()) == int(_nvrtc_major())


def _nvrtc_major() -> str:
    from cuda.bindings import nvrtc

    return str(nvrtc.nvrtcVersion()[1])


def test_the_table_lists_only_packages_checked_on_pypi():
    """Guard: a new entry must have been looked up (see the module docstring) and named here."""
    checked = {p for _, a, b in KNOWN.values() for p in (a, b)}
    from kernel_lsp.advice import _LIBRARIES

    listed = {p for _, lib in _LIBRARIES for p in (lib.package, lib.package_cu12)}
    assert listed == checked
