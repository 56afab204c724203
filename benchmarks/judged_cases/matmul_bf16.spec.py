"""C = A B, fp32 accumulation: a thread an output, against 16x16 tiles through shared memory (the milliseconds end) (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="matmul_bf16",
    sizes=[{"M": 1, "N": 1, "K": 1}, {"M": 33, "N": 17, "K": 45}, {"M": 64, "N": 128, "K": 96}],
    timing_sizes=[{"M": 4096, "N": 4096, "K": 4096}],
    args={
        "A": In("bfloat16", shape="(M, K)", dist="uniform(-1, 1)"),
        "B": In("bfloat16", shape="(K, N)", dist="uniform(-1, 1)"),
        "C": Out("bfloat16", shape="(M, N)"),
        "M": Scalar("int32"),
        "N": Scalar("int32"),
        "K": Scalar("int32"),
    },
    reference=lambda A, B: {"C": A.astype(np.float64) @ B.astype(np.float64)},
)
