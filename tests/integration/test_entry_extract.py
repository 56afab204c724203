"""Extraction of LLM answers for files with host launchers (issue 21, part 3): a complete file is
taken as the new file, never spliced so that code moves above what it calls; kernels alone keep
the original's host code; extraction says what it changed. And what the loop reads around an
entry: its signature, its kernels, the lines that belong to it, host state a candidate adds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.check import spec_findings
from kernel_lsp.compile import CompileOptions, compile_source, cuda_include_dirs, find_toolchain
from kernel_lsp.optimizer.entry import entries_at, entry_kernels, signature_problem
from kernel_lsp.optimizer.extract import extract_candidate, is_complete_file
from kernel_lsp.optimizer.file_items import add_includes, needed_includes, top_items
from kernel_lsp.optimizer.static_checks import host_mutable_statics, inspect_candidate

ENTRIES = Path(__file__).resolve().parents[2] / "samples" / "entries"
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
NVCC = CompileOptions(arch="sm_90", compiler="nvcc", include_dirs=cuda_include_dirs(), host_check=True)

# A kernel spec's file in the benchmark shape: a kernel, its launch line, an extern "C" launcher.
BENCHMARK = """\
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>

// kernel-lsp: launch vector_add_bf16_kernel grid=cdiv(n, 256) block=256
__global__ void vector_add_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

extern "C" void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    vector_add_bf16_kernel<<<(n + 255) / 256, 256>>>(a, b, c, n);
}
"""
# The answer a model gives: the whole file, its unused includes dropped.
WHOLE = """\
#include <cuda_bf16.h>

// kernel-lsp: launch vector_add_bf16_kernel grid=cdiv(n, 512) block=512
__global__ void vector_add_bf16_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                                       __nv_bfloat16* __restrict__ c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

extern "C" void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    vector_add_bf16_kernel<<<(n + 511) / 512, 512>>>(a, b, c, n);
}
"""


def fenced(code: str, lang: str = "cuda") -> str:
    return f"Here is the optimized version:\n\n```{lang}\n{code}```\n\nLarger blocks and restrict pointers."


@needs_nvcc
def test_a_complete_file_with_dropped_includes_is_taken_whole_not_spliced():
    """The issue's case: the old extractor saw host code "dropped" (no <cstdio>), spliced the
    kernels in and put the answer's launcher above them: `identifier "vector_add_bf16_kernel"
    is undefined` in code the user never wrote."""
    got = extract_candidate(fenced(WHOLE), BENCHMARK, ["vector_add_bf16_kernel"])
    assert got.source == WHOLE and got.message == ""
    result = compile_source(got.source, "vector_add_bf16.cu", NVCC)
    assert result.ok, [d.message for d in result.diagnostics]


@needs_nvcc
def test_kernels_with_a_launcher_of_their_own_keep_the_originals_host_code():
    """A kernel spec's answer that replaced `main` with a launcher of its own: its kernels are
    spliced in, its launcher is left out (with a note), and nothing moves above what it calls."""
    original = BENCHMARK.replace(
        'extern "C" void vector_add_bf16', 'int main() { return 0; }\nextern "C" void vector_add_bf16'
    )
    answer = WHOLE.replace('extern "C" void vector_add_bf16(', 'extern "C" void launch_it(')
    got = extract_candidate(fenced(answer), original, ["vector_add_bf16_kernel"])
    assert "spliced into the original file (keeping its host code)" in got.message
    assert "the answer's host code (`launch_it`) was left out" in got.message
    assert "launch_it" not in got.source and "int main()" in got.source
    assert "__restrict__ a" in got.source and got.source.count("__global__") == 1
    assert compile_source(got.source, "vector_add_bf16.cu", NVCC).ok


def test_complete_files_for_an_entry():
    launcher_elsewhere = WHOLE.replace("vector_add_bf16(const", "vadd_bf16(const")
    assert is_complete_file(WHOLE, "vector_add_bf16")
    assert is_complete_file(launcher_elsewhere, "vector_add_bf16")  # taken; the gate says why not
    kernels_only = WHOLE.split('extern "C"')[0]
    assert not is_complete_file(kernels_only, "vector_add_bf16")
    assert not is_complete_file("void helper(float* x) { x[0] = 1; }\n", "vector_add_bf16")


def test_the_complete_file_wins_over_snippets_and_shell_blocks():
    original = (ENTRIES / "vector_add_bf16.cu").read_text()
    answer = (
        "First the idea:\n```cuda\n__device__ float twice(float x) { return 2 * x; }\n```\n"
        "Build it with:\n```bash\nnvcc -O3 -shared -o lib.so vector_add_bf16.cu\n```\n"
        f"The whole file:\n```cuda\n{WHOLE}```\n"
    )
    got = extract_candidate(answer, original, [], entry="vector_add_bf16")
    assert got.source == WHOLE and got.message == ""


def test_kernels_with_new_names_and_no_launcher_are_no_candidate():
    original = (ENTRIES / "vector_add_bf16.cu").read_text()
    answer = fenced(WHOLE.split('extern "C"')[0].replace("vector_add_bf16_kernel", "vadd_vec2"))
    got = extract_candidate(answer, original, [], entry="vector_add_bf16")
    assert got.source is None
    assert got.message == (
        "the answer defines kernels (vadd_vec2) but not the entry `vector_add_bf16` that launches them: "
        "a complete file needs its launcher"
    )


def test_includes_a_text_needs():
    assert needed_includes("__global__ void k(__half* x) {}") == ["cuda_fp16.h"]
    assert needed_includes("#include <cuda_bf16.h>\n__global__ void k(__half* x) {}") == []
    assert needed_includes('#include <stdio.h>\nvoid f() { printf("x"); }') == []
    assert needed_includes("namespace cg = cooperative_groups;\nvoid f() { std::vector<int> v; }") == [
        "cooperative_groups.h",
        "vector",
    ]
    text = "// A header comment\n// on two lines\n\n__global__ void k(__half* x) {}\n"
    assert add_includes(text, ["cuda_fp16.h"]) == (
        "// A header comment\n// on two lines\n#include <cuda_fp16.h>\n\n__global__ void k(__half* x) {}\n"
    )
    # Not inside a last comment line that has no newline.
    assert add_includes("// only a comment", ["cuda_fp16.h"]) == "// only a comment\n#include <cuda_fp16.h>\n"


def test_top_level_items():
    source = (ENTRIES / "l2_normalize_coop.cu").read_text()
    kinds = [(i.kind, i.name) for i in top_items(source)]
    assert kinds == [
        ("pp", "cuda_runtime.h"),
        ("pp", "cooperative_groups.h"),
        ("other", "cg"),
        ("pp", "THREADS"),
        ("kernel", "l2_normalize_kernel"),
        ("host", "l2_normalize"),
    ]


def test_the_entrys_signature_must_stay():
    original = (ENTRIES / "layernorm_fp32.cu").read_text()
    assert (
        signature_problem(
            original.replace("float eps)\n{", "float eps) noexcept\n{"), original, "layernorm_fp32"
        )
        is None
    )
    assert (
        signature_problem(
            original.replace("const float* gamma,", "const float* __restrict__ gamma,"),
            original,
            "layernorm_fp32",
        )
        is None
    )
    assert signature_problem(original.replace('extern "C" int', "int"), original, "layernorm_fp32") == (
        'the entry `layernorm_fp32` changed its signature: it lost its `extern "C"` linkage; keep '
        '`extern "C" int layernorm_fp32(const float* x, const float* gamma, const float* beta, float* y, '
        "int rows, int cols, float eps)` as it is"
    )
    assert "returns `void` instead of `int`" in signature_problem(
        original.replace('extern "C" int', 'extern "C" void'), original, "layernorm_fp32"
    )
    assert "takes 6 parameters instead of 7" in signature_problem(
        original.replace(", float eps)\n{", ")\n{"), original, "layernorm_fp32"
    )


def test_the_kernels_an_entry_launches_and_the_lines_that_belong_to_it():
    source = (ENTRIES / "layernorm_fp32.cu").read_text()
    spec = (ENTRIES / "layernorm_fp32.spec.py").read_text()
    assert entry_kernels(source, "layernorm_fp32") == [
        "row_mean_kernel",
        "row_variance_kernel",
        "normalize_kernel",
    ]
    lines = source.splitlines()
    at = {i: entries_at(source, spec, i) for i in range(1, len(lines) + 1)}
    assert at[lines.index("#define THREADS 256") + 1] == []
    assert at[lines.index("    if (threadIdx.x == 0) mean[blockIdx.x] = partial[0] * inv_cols;") + 1] == [
        "layernorm_fp32"
    ]
    assert at[
        lines.index("    cudaMemset(var_sum, 0, rows * sizeof(float));  // a host step between kernels") + 1
    ] == ["layernorm_fp32"]
    assert entries_at(source, spec.replace('entry="layernorm_fp32"', 'kernel="normalize_kernel"'), 80) == []


def test_host_state_a_candidate_adds_is_a_new_global():
    original = (ENTRIES / "vector_add_bf16.cu").read_text()
    cached = original.replace(
        "    const int threadsPerBlock = 256;",
        "    static const __nv_bfloat16* done = nullptr;\n    if (done == a) return;\n    done = a;\n"
        "    const int threadsPerBlock = 256;",
    )
    assert host_mutable_statics(original) == {}
    assert host_mutable_statics(cached) == {"done": 18}
    found = inspect_candidate(cached, original, host=True)
    assert [str(f) for f in found] == ["line 18: new mutable host static `done` (state that outlives a call)"]
    assert inspect_candidate(cached, original) == []  # a kernel spec's host code never runs


def test_check_reads_an_entry_spec_against_its_host_function(tmp_path):
    """`--check` on an entry spec: its args against the entry's parameters (it used to check
    them against kernels, and said "`a` is not a parameter of " for each)."""
    for name in ("vector_add_bf16.cu", "vector_add_bf16.spec.py"):
        (tmp_path / name).write_text((ENTRIES / name).read_text())
    path = str(tmp_path / "vector_add_bf16.cu")
    source = (tmp_path / "vector_add_bf16.cu").read_text()
    assert spec_findings(path, source) == []
    spec = (tmp_path / "vector_add_bf16.spec.py").read_text().replace('"c": Out', '"out": Out')
    found = spec_findings(path, source, spec_text=spec)
    assert sorted(d.message for d in found) == [
        "`out` is not a parameter of vector_add_bf16",
        "`vector_add_bf16` parameter `__nv_bfloat16* c` has no entry in args",
        "dry run on the CPU: case n=1: reference returned no `out` (it returned c)",
    ]


def test_optimize_without_kernel_takes_the_entry_the_spec_names(tmp_path):
    from kernel_lsp.cli.optimize import _only_entry

    for name in ("layernorm_fp32.cu", "layernorm_fp32.spec.py"):
        (tmp_path / name).write_text((ENTRIES / name).read_text())
    source = (tmp_path / "layernorm_fp32.cu").read_text()
    assert _only_entry(str(tmp_path / "layernorm_fp32.cu"), source) == "layernorm_fp32"
    (tmp_path / "layernorm_fp32.spec.py").write_text('SPEC = Spec(kernel="normalize_kernel")\n')
    assert _only_entry(str(tmp_path / "layernorm_fp32.cu"), source) is None
    assert _only_entry(str(tmp_path / "other.cu"), source) is None


def test_a_test_harness_the_model_added_is_dropped():
    original = (ENTRIES / "vector_add_bf16.cu").read_text()
    harness = (
        "\n// Quick test.\nint main()\n{\n    __nv_bfloat16* a;\n    cudaMalloc(&a, 1024);\n"
        '    vector_add_bf16(a, a, a, 512);\n    FILE* f = fopen("out.txt", "w");\n    return 0;\n}\n'
    )
    got = extract_candidate(fenced(WHOLE + harness), original, [], entry="vector_add_bf16")
    assert got.source == WHOLE
    assert got.message == "dropped the answer's `main` (a test harness: the entry is what runs)"
    # A file that has its own `main` keeps the answer's.
    with_main = original + "int main() { return 0; }\n"
    kept = extract_candidate(fenced(WHOLE + harness), with_main, [], entry="vector_add_bf16")
    assert "int main()" in kept.source and kept.message == ""
