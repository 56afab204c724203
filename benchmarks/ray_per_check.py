"""Per-check cost on one fake GPU: a local worker against one Ray actor, the same 21 checks
(verification only, no timing), so what a Ray request adds is what differs.

    python benchmarks/ray_per_check.py
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "integration"))
import ray
from test_evaluation import _fake_compile
from test_multi_gpu import SPEC, with_behaviour

from kernel_lsp.evaluation.local import LocalBackend
from kernel_lsp.evaluation.ray_backend import RayBackend
from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.spec.isolated import load_specs_isolated


def main() -> None:
    GpuSession.compile = _fake_compile
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    tmp = Path(tempfile.mkdtemp())
    cu = tmp / "vadd.cu"
    (tmp / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs_isolated(str(tmp / "vadd.spec.py"))
    t = TimingSettings(cold_l2=False, budget_s=0.05)
    for name, backend in (
        ("local", LocalBackend(0, 5.0, t, fake=True)),
        ("ray", RayBackend(5.0, t, fake=True)),
    ):
        gpu = GpuSession(backend=backend)
        assert gpu.available
        src = with_behaviour("vadd")
        art = gpu.compile(src, str(cu))
        times = []
        for _ in range(21):
            s = time.perf_counter()
            k = gpu.check(
                GpuCheckRequest(src, str(cu), kernel="vadd", spec=loaded, artifact=art, measure=False)
            )
            times.append(time.perf_counter() - s)
            assert k.ok, k.message
        print(
            f"{name}: first {times[0] * 1000:.0f} ms, then median {statistics.median(times[1:]) * 1000:.1f} ms over 20 checks (verification only)"
        )
        gpu.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
