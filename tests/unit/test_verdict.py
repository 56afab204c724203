"""Whose verdict a file gets (compile/verdict.py), decided from its text, its headers and its
options alone: NVRTC answers only where it sees what nvcc sees; anything it may not see goes to
nvcc. And which nvcc run is the build's: `-c` where the file has host code or its database entry
makes an object."""

from __future__ import annotations

from pathlib import Path

import pytest
from jit_mode_cases import JIT_MODE_CASES
from jit_mode_cases import KERNEL as JIT_KERNEL

from kernel_lsp.compile import verdict
from kernel_lsp.compile.compile_commands import parse_arguments
from kernel_lsp.compile.host_names import global_names, host_name_clashes
from kernel_lsp.compile.options import CompileOptions
from kernel_lsp.compile.verdict import Choice, build_pass, choose, nvrtc_only_error
from kernel_lsp.config import Settings

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n"


@pytest.fixture(autouse=True)
def cuda_headers(tmp_path_factory, monkeypatch):
    """CUDA's header folder, as NVIDIA's wheels lay it out (finding the real one starts a process:
    cuda.pathfinder runs ldconfig)."""
    folder = tmp_path_factory.mktemp("cuda-include")
    for header in ("cub/cub.cuh", "thrust/complex.h", "cuda_fp16.h", "cuda/std/cstdint"):
        (folder / header).parent.mkdir(parents=True, exist_ok=True)
        (folder / header).write_text("#pragma once\n")
    monkeypatch.setattr(verdict, "cuda_include_dirs", lambda: (str(folder),))


def choice(tmp_path: Path, text: str, **options) -> Choice:
    path = tmp_path / "k.cu"
    path.write_text(text)
    return choose(text, str(path), CompileOptions(**options))


@pytest.mark.parametrize(
    "header",
    [
        "cuda_fp16.h",
        "cuda_bf16.h",
        "mma.h",
        "cooperative_groups.h",
        "cooperative_groups/reduce.h",
        "cuda/std/cstdint",
        "cuda/barrier",
        "curand_kernel.h",
    ],
)
def test_nvrtc_answers_for_the_device_headers_it_compiles_as_nvcc_does(tmp_path, header):
    got = choice(tmp_path, f"#include <{header}>\n" + KERNEL)
    assert got == Choice("nvrtc", nvrtc_first=True)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("#include <cstdint>\n", "<cstdint>, which NVRTC cannot open"),
        ("#include <math.h>\n", "<math.h>, which NVRTC cannot open"),
        ('#include "stdint.h"\n', '"stdint.h", which NVRTC cannot open'),
        ("#include <cub/cub.cuh>\n", "a CUDA header that NVRTC does not compile as nvcc does"),
        ("#include <thrust/complex.h>\n", "a CUDA header that NVRTC does not compile as nvcc does"),
        ("#include <my_lib/api.h>\n", "<my_lib/api.h>, which NVRTC cannot open"),
        ("#ifndef __CUDACC_RTC__\n#include <cstdint>\n#endif\n", "tests __CUDACC_RTC__"),
        ("int main() { return 0; }\n", "has host code: `main`"),
        ("#include <cufft.h>\n", "has host code: `#include <cufft.h>`"),
        ("__device__ int index[4];\n", "declares `index` at global scope"),
    ],
)
def test_nvcc_decides_where_nvrtc_may_not_see_what_nvcc_sees(tmp_path, text, why):
    got = choice(tmp_path, text + KERNEL)
    assert got.backend == "nvcc" and not got.nvrtc_first and why in got.why_nvcc, got


def test_a_missing_project_header_is_nvrtcs_to_report_and_nvccs_to_word(tmp_path):
    # Missing for both compilers: NVRTC runs first, and its error goes to nvcc for the words.
    assert choice(tmp_path, '#include "absent.cuh"\n' + KERNEL).backend == "nvrtc"


def test_the_project_headers_are_read_through(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "ok.cuh").write_text('#pragma once\n#include "deeper.cuh"\n#include <cuda_fp16.h>\n')
    (tmp_path / "inc" / "deeper.cuh").write_text(
        "#pragma once\n__device__ float twice(float x) { return 2 * x; }\n"
    )
    text = '#include "inc/ok.cuh"\n' + KERNEL
    assert choice(tmp_path, text).backend == "nvrtc"
    (tmp_path / "inc" / "deeper.cuh").write_text("#pragma once\n#include <cstdint>\n")
    got = choice(tmp_path, text)
    assert got.backend == "nvcc" and got.why_nvcc.startswith(
        "deeper.cuh, which it reads, includes <cstdint>, "
    )
    # An angle include is found through the include folders only, as nvcc finds it (NVRTC would
    # also find it beside the file).
    (tmp_path / "beside.cuh").write_text("#pragma once\n")
    assert choice(tmp_path, "#include <beside.cuh>\n" + KERNEL).backend == "nvcc"
    assert (
        choice(tmp_path, "#include <beside.cuh>\n" + KERNEL, include_dirs=(str(tmp_path),)).backend == "nvrtc"
    )


def test_the_settings_and_the_database_say_it_outright(tmp_path):
    assert choice(tmp_path, KERNEL, compiler="nvrtc") == Choice("nvrtc", nvrtc_alone=True)
    assert choice(tmp_path, "#include <cstdint>\n" + KERNEL, default_device=True).nvrtc_alone
    assert choice(tmp_path, KERNEL, compiler="nvcc").backend == "nvcc"
    assert choice(tmp_path, KERNEL, relaxed_constexpr=True).backend == "nvcc"
    # A database that builds the file with nvcc: nvcc decides, NVRTC's result is a first look.
    assert choice(tmp_path, KERNEL, database_compiler="nvcc") == Choice(
        "nvcc", "its compile_commands.json entry builds it with nvcc", nvrtc_first=True
    )
    assert choice(tmp_path, KERNEL, database_compiler="clang++").backend == "nvrtc"


def test_the_database_reaches_the_compile_options():
    flags = parse_arguments(["/usr/local/cuda/bin/nvcc", "--ptx", "-arch=sm_90", "a.cu"], "/p")
    options = Settings().compile_options("sm_90", None, flags)
    assert (options.database_compiler, options.build_output) == ("nvcc", "ptx")


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        (KERNEL, {}, "device"),
        (KERNEL + "int main() { k<<<1, 32>>>(nullptr); }\n", {}, "host"),
        ("#include <vector>\nstd::vector<float> weights(int n);\n" + KERNEL, {}, "host"),
        # A host header alone runs no host code: candle's device-only kernels include <cuda.h>
        # and are built with `nvcc --ptx`.
        ("#include <cuda.h>\n#include <vector>\n" + KERNEL, {}, "device"),
        (KERNEL, {"build_output": "object"}, "host"),
        (KERNEL, {"host_check": True}, "host"),
        (KERNEL + "int main() {}\n", {"build_output": "ptx"}, "device"),
        (KERNEL + "int main() {}\n", {"build_output": "fatbin"}, "device"),
        # An arch after the first: the first one's compile ran the host pass.
        (KERNEL + "int main() {}\n", {"build_output": "device"}, "device"),
        # The host code nvcc sees: what `#ifndef __CUDACC_RTC__` guards is nvcc's.
        ("#ifndef __CUDACC_RTC__\nint main() {}\n#endif\n" + KERNEL, {}, "host"),
        ("#ifdef __CUDACC_RTC__\nint main() {}\n#endif\n" + KERNEL, {}, "device"),
    ],
)
def test_the_nvcc_run_is_the_builds(tmp_path, text, options, expected):
    path = tmp_path / "k.cu"
    path.write_text(text)
    assert build_pass(text, str(path), CompileOptions(**options)) == expected


def test_host_code_in_a_project_header_makes_the_build_compile_the_host_side(tmp_path):
    (tmp_path / "launch.cuh").write_text("#pragma once\ninline void go() { int* p; cudaMalloc(&p, 4); }\n")
    text = '#include "launch.cuh"\n' + KERNEL
    assert build_pass(text, str(tmp_path / "k.cu"), CompileOptions()) == "host"


def test_later_archs_run_the_device_pass_alone():
    assert CompileOptions().device_pass_only().build_output == "device"
    assert CompileOptions(build_output="object").device_pass_only().build_output == "device"
    assert CompileOptions(build_output="ptx").device_pass_only().build_output == "ptx"


def test_the_global_names_a_text_declares():
    text = (
        "#define F(a) index(a)\n"
        'extern "C" { __global__ void time(float* o, int n) { int index = 3; o[index] = 1; } }\n'
        "namespace ops { __device__ int rand; }\n"
        "namespace { __device__ float gamma = 2.f; }\n"
        "template <typename T> __device__ T relu(T x) { return x > 0 ? x : 0; }\n"
        'const char* s = "{ index;";\n'
    )
    names = global_names(text)
    assert {"time", "gamma", "relu", "s"} <= names
    assert not {"index", "rand", "n", "o", "x"} & names  # a macro, locals, parameters, a namespace's
    assert host_name_clashes(text) == ["gamma", "time"]


@pytest.mark.parametrize(
    ("message", "only_nvrtc"),
    [
        ('cannot open source file "cstdint"', True),
        ('cannot open source file "kernel_utils.cuh"', False),
        (
            "A function without execution space annotations (__host__/__device__/__global__) is considered "
            "a host function, and host functions are not allowed in JIT mode.",
            True,
        ),
        ('identifier "int64_t" is undefined', True),
        ('identifier "INFINITY" is undefined', True),
        ('identifier "idx" is undefined', False),
        ('namespace "std" has no member "numeric_limits"', True),
    ],
)
def test_the_errors_only_jit_mode_gives(message, only_nvrtc):
    assert nvrtc_only_error(message) == only_nvrtc


@pytest.mark.parametrize(("name", "text", "refused"), JIT_MODE_CASES, ids=[c[0] for c in JIT_MODE_CASES])
def test_what_jit_mode_refuses_goes_to_nvcc_at_once(tmp_path, name, text, refused):
    """NVRTC would refuse it, then nvcc decide: nvcc alone, without NVRTC's time first (a file of
    kernels with plain host helpers was 1.15x bare nvcc through the server)."""
    got = choice(tmp_path, text + JIT_KERNEL)
    if refused:
        assert got.backend == "nvcc" and not got.nvrtc_first, got
        assert "which NVRTC's JIT mode refuses" in got.why_nvcc and "(line " in got.why_nvcc
    else:
        assert got == Choice("nvrtc", nvrtc_first=True), got


def test_a_macro_call_at_namespace_scope_is_not_taken_for_a_declaration(tmp_path):
    assert choice(tmp_path, "DEFINE_KERNELS(float);\n" + JIT_KERNEL).backend == "nvrtc"
