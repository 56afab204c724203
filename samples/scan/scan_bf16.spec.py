"""Spec for scan_bf16.cu: y = inclusive prefix sum of x, bf16 in and out, float sums."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Scratch, Spec

SPEC = Spec(
    kernel="scan",
    pipeline=["scan_reduce", "scan_spine", "scan_downsweep"],
    sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        # Non-negative inputs: a prefix sum of mixed signs cancels, and then no relative
        # tolerance can tell a float32 summation order from a bug.
        "x": In("bfloat16", shape="n", dist=["uniform(0, 1)", "positive"]),
        # Exclusive offset of every tile, sized for the smallest BLOCK*ITEMS of the tune space.
        "block_sums": Scratch("float32", shape="max(1, cdiv(n, 128))"),
        # Each sum is rounded once to bf16: 2^-9 relative.
        "y": Out("bfloat16", shape="n", atol=1e-3, rtol=1e-2),
        "n": Scalar("int32"),
    },
    reference=lambda x: {"y": np.cumsum(x, dtype=np.float64)},
    # At least x read once and y written once (this kernel reads x twice).
    work=lambda n: {"bytes": 4 * n, "flops": n},
)
