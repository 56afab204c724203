"""Host entries verified and timed through the real path on the fake GPU: spec -> nvcc shared
library -> worker -> ctypes call -> the verifier. The fake GPU's "device" memory is host memory,
so launchers written for the CPU (loops instead of kernels) run for real, and each cheat or bug
a launcher can have is caught the way it would be on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")

FAST = TimingSettings(warmup_s=0.0, budget_s=0.01, min_samples=30, max_samples=30)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())

SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(
    entry="saxpy",
    sizes=[{{"n": 1000}}, {{"n": 4096}}],
    args={{
        "x": In("float32", shape="n"),
        "y": In("float32", shape="n"),
        "out": Out("float32", shape="n"),
        "n": Scalar("{n_dtype}"),
        "alpha": Scalar("float64", value=0.5),
    }},
    {reference}
)
"""
REFERENCE = 'reference=lambda x, y, alpha: {"out": alpha * x + y},'


def launcher(
    body: str,
    signature: str = "const float* x, const float* y, float* out, size_t n, double alpha",
    ret: str = "void",
) -> str:
    return f'#include <cstdlib>\n#include <cstring>\n#include <cstddef>\nextern "C" {ret} saxpy({signature}) {{\n{body}\n}}\n'


CORRECT = "    for (size_t i = 0; i < n; ++i) out[i] = (float)(alpha * x[i] + y[i]);"


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(fake=True, timing=FAST) as session:
        yield session


def run(
    gpu, tmp_path: Path, source: str, n_dtype: str = "uint64", reference: str = REFERENCE, name: str = "saxpy"
):
    (tmp_path / f"{name}.cu").write_text(source)
    (tmp_path / f"{name}.spec.py").write_text(SPEC.format(n_dtype=n_dtype, reference=reference))
    checks = check_file(gpu, str(tmp_path / f"{name}.cu"), compile_options=OPTIONS)
    assert len(checks) == 1
    return checks[0]


def test_a_correct_launcher_is_verified_and_timed(gpu, tmp_path):
    check = run(gpu, tmp_path, launcher(CORRECT))
    assert check.ok, check.message
    assert check.kernel == "saxpy" and [c["case"] for c in check.cases] == ["n=1000", "n=4096", "n=1", "n=97"]
    (timing,) = check.timings
    assert timing.case == "n=4096" and timing.measurement.n >= 30 and timing.measurement.median_s > 0


@pytest.mark.parametrize(
    "body, kind, words",
    [
        (CORRECT + "\n    out[n] = 1.0f;", "guard", "wrote past its end"),
        (CORRECT + "\n    ((float*)x)[0] = 42.0f;", "input_modified", "input `x` was modified"),
        (
            "    for (size_t i = 0; i < n / 2; ++i) out[i] = (float)(alpha * x[i] + y[i]);",
            "mismatch",
            "wrong",
        ),
        ("    for (size_t i = 0; i < n; ++i) out[i] = (float)(alpha * x[i]);", "mismatch", "wrong"),
    ],
    ids=["out of bounds", "writes its input", "half the work", "wrong formula"],
)
def test_a_wrong_launcher_fails_with_the_reason(gpu, tmp_path, body, kind, words):
    check = run(gpu, tmp_path, launcher(body))
    assert not check.ok and check.problems[0].kind == kind, check.message
    assert words in check.message


def test_a_launcher_that_does_the_work_once_is_caught_or_reset(gpu, tmp_path):
    """State in a static (a call counter, a cache keyed by pointers) is reset before every call:
    the launcher below is right only on its first call, and passes only because each call is one."""
    body = "    static int calls = 0;\n    if (++calls > 1) return;\n" + CORRECT
    check = run(gpu, tmp_path, launcher(body))
    assert check.ok, check.message


def test_a_non_zero_status_is_a_failure(gpu, tmp_path):
    body = CORRECT + "\n    return n > 100 ? 3 : 0;"
    check = run(gpu, tmp_path, launcher(body, ret="int"))
    assert not check.ok and "`saxpy` returned 3" in check.message


def test_every_scalar_crosses_the_c_abi_with_its_own_type(gpu, tmp_path):
    # int n (4 bytes) and float alpha: a wrong width would shift every later argument.
    sig = "const float* x, const float* y, float* out, int n, float alpha"
    body = "    for (int i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];"
    source = launcher(body, sig)
    (tmp_path / "saxpy.cu").write_text(source)
    spec = SPEC.format(n_dtype="int32", reference=REFERENCE).replace(
        'Scalar("float64", value=0.5)', 'Scalar("float32", value=0.5)'
    )
    (tmp_path / "saxpy.spec.py").write_text(spec)
    (check,) = check_file(gpu, str(tmp_path / "saxpy.cu"), compile_options=OPTIONS)
    assert check.ok, check.message


def test_a_leaking_launcher_is_caught_after_timing(gpu, tmp_path):
    body = "    char* leak = (char*)malloc(48 << 20);\n    memset(leak, 1, 48 << 20);\n" + CORRECT
    check = run(gpu, tmp_path, launcher(body))
    assert not check.ok and check.problems[0].kind == "leak", check.message
    assert "host memory were not given back" in check.message


def test_a_stream_parameter_gets_the_workers_stream(gpu, tmp_path):
    source = "#include <cuda_runtime.h>\n" + launcher(
        CORRECT, "const float* x, const float* y, float* out, size_t n, double alpha, cudaStream_t stream"
    )
    check = run(gpu, tmp_path, source)
    assert check.ok, check.message


def test_without_a_reference_the_baseline_is_the_oracle(gpu, tmp_path):
    (tmp_path / "original.cu").write_text(launcher(CORRECT))
    reference = 'baseline="original.cu",'
    assert run(gpu, tmp_path, launcher(CORRECT), reference=reference).ok
    wrong = run(gpu, tmp_path, launcher(CORRECT + "\n    if (n > 500) out[7] += 1.0f;"), reference=reference)
    assert not wrong.ok and wrong.problems[0].kind == "baseline_mismatch", wrong.message
    assert "the original gave" in wrong.message


def test_a_spec_that_does_not_fit_the_entry_is_a_spec_error(gpu, tmp_path):
    check = run(gpu, tmp_path, launcher(CORRECT), n_dtype="int32")
    assert check.status == "spec_error"
    assert "`n` is `size_t` (uint64) but the spec says int32" in check.message
