"""Spec for reduce_sum_fp32.cu: out = sum(x), two passes (block partials, then one block)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Scratch, Spec

SPEC = Spec(
    kernel="reduce_sum",
    pipeline=["reduce_sum_partial", "reduce_sum_final"],
    sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        "x": In("float32", shape="n", dist=["normal", "uniform(-1, 1)", "positive"]),
        # One partial per block of pass 1; sized for the smallest block the tuner may pick
        # (BLOCK=128, ITEMS=1), so every point of the tune space fits.
        "partial": Scratch("float32", shape="max(1, cdiv(n, 128))"),
        # Float sums in a different order than numpy: the error grows like sqrt(n) * eps * |x|.
        "out": Out("float32", shape=1, atol=1e-3, rtol=1e-4),
        "n": Scalar("int32"),
    },
    reference=lambda x: {"out": np.array([x.astype(np.float64).sum()], dtype=np.float32)},
    work=lambda n: {"bytes": 4 * n, "flops": n},
)
