"""out = sum(x): block sums into scratch, the launcher's own cudaDeviceSynchronize, a second kernel, against shuffles and one atomic a block (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="reduce_fp32",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("float32", shape="n"),
        "out": Out("float32", shape=1, atol=5e-1, rtol=1e-3),  # float sums in any order
        "n": Scalar("int32"),
    },
    reference=lambda x: {"out": np.array([x.astype(np.float64).sum()])},
)
