"""On a GPU: kernels whose specs have no launch comment run as the file's host code launches
them (an `extern "C"` launcher's `<<<(n + threads - 1) / threads, threads>>>`, a `constexpr`
block, a two-kernel pipeline with dynamic shared memory), verified and timed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"

SPEC = """
from kernel_lsp.spec import In, InOut, Out, Scalar, Scratch, Spec
SPECS = [
    Spec(kernel="vector_add_kernel", sizes=[{"n": 1}, {"n": 1000}, {"n": 1_000_003}],
         args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
         reference=lambda a, b: {"c": a + b}),
    Spec(kernel="scale_kernel", sizes=[{"n": 1}, {"n": 4097}, {"n": 1_000_003}],
         args={"y": InOut("float32", atol=1e-6, rtol=1e-6), "alpha": Scalar("float32", 0.5), "n": Scalar("int32")},
         reference=lambda y, alpha: {"y": y * alpha}),
    Spec(kernel="sum", pipeline=["partial_sums_kernel", "final_sum_kernel"],
         sizes=[{"n": 1}, {"n": 1000}, {"n": 100_000}],
         args={"x": In("float32", dist="uniform(0, 1)"), "partial": Scratch("float32", shape="cdiv(n, 256)"),
               "out": InOut("float32", shape=1, dist="zeros", atol=1e-2, rtol=1e-4),
               "n": Scalar("int32"), "count": Scalar("int32", "cdiv(n, 256)")},
         reference=lambda x, out: {"out": out + x.astype("float64").sum(keepdims=True)}),
]
"""


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(timing=TimingSettings(budget_s=0.2)) as session:
        assert session.available, session.reason
        yield session


def test_specs_without_launch_comments_run_the_host_launch(gpu, tmp_path):
    cu = tmp_path / "bench.cu"
    shutil.copy(CORPUS / "bench_launchers.cu", cu)
    (tmp_path / "bench.spec.py").write_text(SPEC)
    source = cu.read_text()
    artifact = gpu.compile(source, str(cu), CompileOptions())
    assert artifact.ok, [d.message for d in artifact.diagnostics]
    checks = check_file(gpu, str(cu), source, artifact=artifact)
    assert [c.kernel for c in checks] == ["vector_add_kernel", "scale_kernel", "sum"]
    for check in checks:
        assert check.ok, check.message
        assert check.timings and check.timings[-1].measurement.median_s > 0
