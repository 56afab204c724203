"""Spec for reduce_sum_bf16.cu: out = sum(x), bf16 in and out, float accumulation."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Scratch, Spec

SPEC = Spec(
    kernel="reduce_sum",
    pipeline=["reduce_sum_partial", "reduce_sum_final"],
    sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        "x": In("bfloat16", shape="n", dist=["normal", "uniform(-1, 1)", "positive"]),
        "partial": Scratch("float32", shape="max(1, cdiv(n, 128))"),  # smallest BLOCK*ITEMS: 128
        # The float sum is rounded once to bf16 (2^-9 relative); the float error is far smaller.
        "out": Out("bfloat16", shape=1, atol=1e-2, rtol=1e-2),
        "n": Scalar("int32"),
    },
    reference=lambda x: {"out": np.array([x.astype(np.float64).sum()], dtype=np.float32)},
    work=lambda n: {"bytes": 2 * n, "flops": n},
)
