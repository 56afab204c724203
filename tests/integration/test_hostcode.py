"""Host-code detection: what NVRTC cannot compile is found, guarded code is not."""

from __future__ import annotations

from kernel_lsp.compile import CompileOptions, compile_source
from kernel_lsp.hostcode import find_host_code, host_code_message

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


def whats(source: str) -> list[tuple[int, str]]:
    return [(u.line, u.what) for u in find_host_code(source)]


def test_device_only_file_has_no_host_code():
    assert find_host_code(KERNEL) == []


def test_main_malloc_vector_launch_are_found():
    src = (
        "#include <vector>\n"  # 1
        + KERNEL  # 2
        + "int main() {\n"  # 3
        "  std::vector<float> h(4);\n"  # 4
        "  float* d; cudaMalloc(&d, 16);\n"  # 5
        "  k<<<1, 4>>>(d);\n"  # 6
        "}\n"
    )
    got = whats(src)
    assert (1, "`#include <vector>`") in got
    assert (3, "`main`") in got
    assert (4, "`std::vector`") in got
    assert (5, "`cudaMalloc`") in got
    assert (6, "a `<<<...>>>` launch") in got


def test_ifndef_cudacc_rtc_guard_hides_host_code():
    src = KERNEL + "#ifndef __CUDACC_RTC__\n#include <vector>\nint main() { cudaMalloc(0, 0); }\n#endif\n"
    assert find_host_code(src) == []


def test_if_not_defined_guard_and_nested_ifs():
    src = (
        KERNEL + "#if !defined(__CUDACC_RTC__)\n#if 1\nint main() { return 0; }\n#endif\n"
        "cudaFree(0);\n#endif\n"
    )
    assert find_host_code(src) == []


def test_else_branch_of_ifdef_rtc_is_host_only():
    src = "#ifdef __CUDACC_RTC__\n" + KERNEL + "#else\nint main() { return 0; }\n#endif\n"
    assert find_host_code(src) == []


def test_else_branch_of_a_host_guard_is_seen_by_nvrtc():
    src = "#ifndef __CUDACC_RTC__\nint main() { return 0; }\n#else\nint main() { return 1; }\n#endif\n"
    assert whats(src) == [(4, "`main`")]


def test_code_after_the_guard_counts_again():
    src = "#ifndef __CUDACC_RTC__\n#include <vector>\n#endif\nint main() {}\n"
    assert whats(src) == [(4, "`main`")]


def test_comments_do_not_count():
    src = KERNEL + "// int main() { cudaMalloc(&p, 4); }\n/* std::vector<int> v; k<<<1,1>>>(); */\n"
    assert find_host_code(src) == []


def test_message_says_how_to_fix_and_counts_the_rest():
    uses = find_host_code("int main(){}\n" * 6)
    msg = host_code_message(uses)
    assert "#ifndef __CUDACC_RTC__" in msg and "--default-device" in msg
    assert "and 2 more" in msg


HOST_FILE = (
    "#include <vector>\n" + KERNEL + "int main() { std::vector<int> v(3); float* d; cudaMalloc(&d, 4); }\n"
)


def test_a_host_file_goes_to_nvcc_under_auto():
    result = compile_source(HOST_FILE, "/tmp/kernel_lsp_host.cu", CompileOptions(arch="sm_90"))
    assert result.compiler == "nvcc"
    assert result.ok and result.diagnostics == []
    assert [k.name for k in result.kernels] == ["k"]


def test_a_failing_host_file_gets_one_diagnostic_instead_of_a_wall():
    result = compile_source(
        HOST_FILE, "/tmp/kernel_lsp_host.cu", CompileOptions(arch="sm_90", compiler="nvrtc")
    )
    assert not result.ok
    (d,) = result.diagnostics
    assert d.code == "host-code" and d.line == 1
    assert "NVRTC compiles device code only" in d.message
    assert "compiler setting is `nvrtc`" in d.message
    # The other uses are kept as related locations.
    assert {r[1] for r in d.related} >= {3}


def test_guarded_host_code_compiles_with_nvrtc():
    src = KERNEL + "#ifndef __CUDACC_RTC__\n#include <vector>\nint main() { std::vector<int> v; }\n#endif\n"
    result = compile_source(src, "/tmp/kernel_lsp_guarded.cu", CompileOptions(arch="sm_90"))
    assert result.ok, result.diagnostics
    assert [k.name for k in result.kernels] == ["k"]


def test_host_code_that_compiles_anyway_is_not_reported():
    # An unannotated helper with -default-device compiles; no host-code finding then.
    src = "float twice(float v) { return 2 * v; }\n__global__ void k(float* x) { x[0] = twice(x[1]); }\n"
    bad = compile_source(src, "/tmp/kernel_lsp_dd.cu", CompileOptions(arch="sm_90"))
    assert not bad.ok
    good = compile_source(src, "/tmp/kernel_lsp_dd.cu", CompileOptions(arch="sm_90", default_device=True))
    assert good.ok and not any(d.code == "host-code" for d in good.diagnostics)
