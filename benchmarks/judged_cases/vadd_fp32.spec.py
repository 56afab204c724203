"""c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="vadd_fp32",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 20}],
    args={
        "a": In("float32", shape="n"),
        "b": In("float32", shape="n"),
        "c": Out("float32", shape="n"),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a.astype(np.float32) + b.astype(np.float32)},
)
