"""Spec for dot_bf16.cu: out = a . b, bf16 in and out, float products and sums, two passes."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Scratch, Spec

SPEC = Spec(
    kernel="dot",
    pipeline=["dot_partial", "dot_final"],
    sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        "a": In("bfloat16", shape="n", dist=["normal", "uniform(-1, 1)", "positive"]),
        "b": In("bfloat16", shape="n", dist=["normal", "uniform(-1, 1)", "positive"]),
        # One partial per block of pass 1, sized for the smallest BLOCK*ITEMS of the tune space.
        "partial": Scratch("float32", shape="max(1, cdiv(n, 128))"),
        # The float sum is rounded once to bf16 (2^-9 relative).
        "out": Out("bfloat16", shape=1, atol=1e-2, rtol=1e-2),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"out": np.array([np.dot(a.astype(np.float64), b)], dtype=np.float32)},
    work=lambda n: {"bytes": 4 * n, "flops": 2 * n},
)
