"""Spec for gemm_bf16.cu: C = A @ B, BF16 in and out, float accumulation, row-major."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="gemm",
    sizes=[
        {"M": 1, "N": 1, "K": 1},
        {"M": 1, "N": 37, "K": 5},
        {"M": 17, "N": 31, "K": 13},
        {"M": 127, "N": 65, "K": 257},
        {"M": 4096, "N": 4096, "K": 4096},  # 137 GFLOP for timing
    ],
    args={
        "A": In("bfloat16", shape="(M, K)"),
        "B": In("bfloat16", shape="(K, N)"),
        # Float sums, then one rounding to bf16 (2^-9 relative).
        "C": Out("bfloat16", shape="(M, N)", atol=1e-2, rtol=1e-2),
        "M": Scalar("int32"),
        "N": Scalar("int32"),
        "K": Scalar("int32"),
    },
    reference=lambda A, B: {"C": np.matmul(A, B)},
    work=lambda M, N, K: {"bytes": 2 * (M * K + K * N + M * N), "flops": 2 * M * N * K},
)
