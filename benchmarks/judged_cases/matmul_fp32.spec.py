"""C = A B, fp32 accumulation: a thread an output, against 16x16 tiles through shared memory (the milliseconds end) (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="matmul_fp32",
    sizes=[{"M": 1, "N": 1, "K": 1}, {"M": 33, "N": 17, "K": 45}, {"M": 64, "N": 128, "K": 96}],
    timing_sizes=[{"M": 2048, "N": 2048, "K": 2048}],
    args={
        "A": In("float32", shape="(M, K)", dist="uniform(-1, 1)"),
        "B": In("float32", shape="(K, N)", dist="uniform(-1, 1)"),
        "C": Out("float32", shape="(M, N)", atol=1e-3, rtol=1e-3),
        "M": Scalar("int32"),
        "N": Scalar("int32"),
        "K": Scalar("int32"),
    },
    reference=lambda A, B: {"C": A.astype(np.float64) @ B.astype(np.float64)},
)
