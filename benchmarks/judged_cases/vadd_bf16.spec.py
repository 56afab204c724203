"""c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="vadd_bf16",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 21}],
    args={
        "a": In("bfloat16", shape="n"),
        "b": In("bfloat16", shape="n"),
        "c": Out("bfloat16", shape="n"),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a.astype(np.float32) + b.astype(np.float32)},
)
