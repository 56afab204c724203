"""y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, InOut, Scalar, Spec

SPEC = Spec(
    entry="saxpy_bf16",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("bfloat16", shape="n"),
        "y": InOut("bfloat16", shape="n"),
        "alpha": Scalar("float32", value=2.0),
        "n": Scalar("int32"),
    },
    reference=lambda x, y, alpha: {"y": alpha * x.astype(np.float32) + y.astype(np.float32)},
)
