"""The host side of a check's timing, without a GPU: wall time of one verify-and-measure on the
fake worker (kernel_lsp/runner/fake.py), and the part of it that timing adds (a check with timing
minus one without). It shows what input sets, references and the output checks after timing cost
on the host; the GPU side is benchmarks/timing.py's "check s" and "timing s" columns.

    python benchmarks/timing_host.py [n ...]        # default n = 1048576 16777216
    PYTHONPATH=<older checkout> python benchmarks/timing_host.py   # the same for another version
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from kernel_lsp.gpu import GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.spec import load_specs

STEPS = [
    {"kernel": "vadd", "symbol": "k", "params": ["a", "b", "c", "n"], "grid": "1", "block": "1", "smem": "0"}
]
REPEATS = 3


def spec_for(n: int):
    path = Path(tempfile.mkdtemp()) / "vadd.spec.py"
    path.write_text(
        textwrap.dedent(
            f"""\
            from kernel_lsp.spec import In, Out, Scalar, Spec
            SPEC = Spec(
                kernel="vadd",
                sizes=[{{"n": 1}}, {{"n": 1000}}, {{"n": {n}}}],
                args={{"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")}},
                reference=lambda a, b: {{"c": a + b}},
            )
            """
        )
    )
    return load_specs(str(path)).specs[0]


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [1 << 20, 1 << 24]
    print(
        "n          check s  timing s  (median of 3, fake worker, warm L2: the fake's bandwidth is no bound)"
    )
    for n in sizes:
        spec = spec_for(n)
        with GpuSession(fake=True, timing=TimingSettings(budget_s=0.2, cold_l2=False)) as s:
            s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, measure=False)
            whole, verify = [], []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                r = s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec)
                whole.append(time.perf_counter() - t0)
                assert r.ok and r.timings, r.message
                t0 = time.perf_counter()
                s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, measure=False)
                verify.append(time.perf_counter() - t0)
        w, v = statistics.median(whole), statistics.median(verify)
        print(f"{n:<10d} {w:7.2f}  {w - v:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
