"""The `ray` backend on a real GPU: a local Ray cluster over this machine's GPU, one actor on it;
a spec'd kernel verified and timed through the actor (the result says its host and GPU), an A/B
comparison there, and `kernel-lsp bench --backend ray`. On the device Ray comes from
`.ci/pack-ray`'s folder (`RAY=1 .ci/gpu-run`)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from kernel_lsp.cli.bench import bench_main
from kernel_lsp.evaluation.choose import open_backends
from kernel_lsp.gpu import GpuCheckRequest, GpuCompareRequest, GpuSession
from kernel_lsp.model import TimingSettings

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (pip install kernel-lsp[ray], or RAY=1 .ci/gpu-run)"
)

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="module")
def cluster():
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def actor_gpu(cluster):
    """An actor on the machine's one GPU, for one test: while it lives, the GPU is held, and a
    second actor (bench's) would find none free."""
    backends = open_backends("ray", "1", timing=TimingSettings(budget_s=0.3))
    assert type(backends[0]).__name__ == "RayBackend"
    with GpuSession(backend=backends[0]) as session:
        assert session.available, session.reason
        yield session


def test_vadd_verified_and_timed_through_a_ray_actor(actor_gpu):
    path = FIXTURES / "good.cu"
    source = path.read_text()
    result = actor_gpu.check(
        GpuCheckRequest(source, str(path), kernel="vadd", spec=str(FIXTURES / "vadd.spec.py"))
    )
    assert result.ok, result.message
    assert result.timings and result.timings[0].measurement.median_s > 0
    assert result.host == socket.gethostname() and result.device_index == 0
    assert result.device is not None and result.device.arch.startswith("sm_")
    comparison = actor_gpu.compare(
        GpuCompareRequest(source, source, str(path), kernel="vadd", spec=str(FIXTURES / "vadd.spec.py"))
    )
    assert comparison.error is None and comparison.n > 0 and 0.8 < comparison.speedup < 1.25
    assert comparison.host == socket.gethostname() and comparison.device_index == 0


def test_bench_through_ray(cluster):
    out = io.StringIO()
    code = bench_main(
        [
            str(SAMPLES / "vector_add" / "vector_add_fp32.cu"),
            "--backend",
            "ray",
            "--budget",
            "0.3",
            "--no-occupancy",
        ],
        out=out,
    )
    assert code == 0, out.getvalue()
    assert "vector_add" in out.getvalue() and "device:" in out.getvalue()
