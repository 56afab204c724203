"""Host-entry specs without a GPU: the entry's C signature, how each parameter crosses the C ABI,
and the spec checked against it (kernel_lsp/host_entry.py, kernel_lsp/spec/checking.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.host_entry import entry_abi, find_host_function
from kernel_lsp.spec import check_entry_spec, load_specs

LAUNCHERS = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>
__global__ void vadd_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n) {}

// the benchmark shape: an extern "C" launcher
extern "C" void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n) {
    vadd_kernel<<<(n + 255) / 256, 256>>>(a, b, c, n);
}

extern "C" {
cudaError_t scaled(float* __restrict__ y, const float* x, size_t n, double alpha, cudaStream_t stream);
}
cudaError_t scaled(float* __restrict__ y, const float* x, size_t n, double alpha, cudaStream_t stream) {
    return cudaSuccess;
}
static void by_reference(std::vector<float>& v, float4 q) {}
template <int B> void templated(float* x) {}
int plain_cpp(unsigned char* bytes, long long count, bool flag, unsigned short half_bits) { return 0; }
"""


def test_an_extern_c_launcher_and_its_abi():
    fn = find_host_function(LAUNCHERS, "vector_add_bf16")
    assert fn is not None and fn.extern_c and fn.definition and fn.line == 7
    abi = entry_abi(fn)
    assert [(a.name, a.code, a.dtype) for a in abi.args] == [
        ("a", "ptr", "bfloat16"),
        ("b", "ptr", "bfloat16"),
        ("c", "ptr", "bfloat16"),
        ("n", "i32", "int32"),
    ]
    assert abi.returns == "void" and not abi.problems and abi.stream_param is None


def test_c_linkage_from_an_earlier_declaration_sizes_doubles_and_streams():
    fn = find_host_function(LAUNCHERS, "scaled")
    assert fn is not None and fn.extern_c and fn.return_type == "cudaError_t"
    abi = entry_abi(fn)
    assert [a.code for a in abi.args] == ["ptr", "ptr", "u64", "f64", "stream"]
    assert abi.returns == "status" and abi.stream_param == "stream"


def test_cpp_linkage_scalars_of_every_width():
    fn = find_host_function(LAUNCHERS, "plain_cpp")
    assert fn is not None and not fn.extern_c
    assert [a.code for a in entry_abi(fn).args] == ["ptr", "i64", "u8", "u16"]


@pytest.mark.parametrize(
    "name, problem",
    [("by_reference", "cannot be passed from a spec"), ("templated", "is a template")],
)
def test_signatures_the_worker_cannot_call_say_why(name, problem):
    fn = find_host_function(LAUNCHERS, name)
    assert fn is not None
    assert any(problem in p for p in entry_abi(fn).problems)


def test_kernels_and_unknown_names_are_not_host_functions():
    assert find_host_function(LAUNCHERS, "vadd_kernel") is None
    assert find_host_function(LAUNCHERS, "missing") is None


def _spec(tmp_path: Path, body: str):
    path = tmp_path / "x.spec.py"
    path.write_text("from kernel_lsp.spec import Spec, In, Out, InOut, Scalar\n" + body)
    return load_specs(str(path))


def test_an_entry_spec_that_fits_has_no_findings(tmp_path):
    loaded = _spec(
        tmp_path,
        """SPEC = Spec(entry="scaled", sizes=[{"n": 100}],
    args={"y": Out("float32"), "x": In("float32"), "n": Scalar("uint64"), "alpha": Scalar("float64", value=2.0)},
    reference=lambda x, alpha: {"y": alpha * x})
""",
    )
    assert loaded.ok, loaded.diagnostics
    spec = loaded.specs[0]
    assert spec.is_entry and spec.kernel == "scaled" and spec.kernels == []
    fn = find_host_function(LAUNCHERS, "scaled")
    assert check_entry_spec(spec, fn, entry_abi(fn)) == []


def test_entry_spec_findings_name_the_argument(tmp_path):
    loaded = _spec(
        tmp_path,
        """SPEC = Spec(entry="scaled", sizes=[{"n": 100}],
    args={"y": Out("float64"), "x": Scalar("float32"), "stream": Scalar("int64"), "extra": In("float32")},
    reference=lambda x: {"y": x})
""",
    )
    spec = loaded.specs[0]
    fn = find_host_function(LAUNCHERS, "scaled")
    messages = [d.message for d in check_entry_spec(spec, fn, entry_abi(fn))]
    assert any("`y` is `float* __restrict__` (float32) but the spec says float64" in m for m in messages)
    assert any("`x` is a pointer" in m for m in messages)
    assert any("parameter `size_t n` has no entry in args" in m for m in messages)
    assert any("`stream` is the entry's stream" in m for m in messages)
    assert any("`extra` is not a parameter of scaled" in m for m in messages)
    missing = check_entry_spec(spec, None, None)
    assert [d.message for d in missing] == ["no host function `scaled` in the .cu file"]


def test_kernel_and_entry_together_and_a_missing_baseline_are_spec_errors(tmp_path):
    loaded = _spec(
        tmp_path,
        """SPECS = [
    Spec(kernel="k", entry="e", sizes=[{"n": 1}], args={}),
    Spec(entry="e", baseline="original.cu", sizes=[{"n": 1}], args={"c": Out("float32")}),
    Spec(sizes=[{"n": 1}], args={}),
]
""",
    )
    messages = [d.message for d in loaded.diagnostics]
    assert "give either kernel= or entry=, not both" in messages
    assert any(m.startswith("baseline file not found") and m.endswith("original.cu") for m in messages)
    assert any("name what to run" in m for m in messages)
    # A baseline is the oracle: no "no reference" warning for that spec.
    (tmp_path / "original.cu").write_text("")
    loaded = _spec(
        tmp_path,
        'SPEC = Spec(entry="e", baseline="original.cu", sizes=[{"n": 1}], args={"c": Out("float32")})\n',
    )
    assert not [d for d in loaded.diagnostics if "reference" in d.message], loaded.diagnostics
