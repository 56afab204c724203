"""Spec for monte_carlo_bf16.cu: the mean of 4 / (1 + u^2) over n hashed points u in [0, 1), BF16.

The reference makes exactly the kernel's points (the same counter-based hash), so the tolerance
only covers the order of the float sums, not sampling noise: a kernel that writes pi fails."""

import ml_dtypes
import numpy as np

from kernel_lsp.spec import Out, Scalar, Scratch, Spec


def lowbias32(v):
    """The kernel's hash on uint32 arrays (numpy arrays wrap around on overflow, as C does)."""
    v = np.atleast_1d(np.asarray(v, dtype=np.uint32))
    v = v ^ (v >> np.uint32(16))
    v = v * np.uint32(0x7FEB352D)
    v = v ^ (v >> np.uint32(15))
    v = v * np.uint32(0x846CA68B)
    return v ^ (v >> np.uint32(16))


def reference(n, seed):
    key = lowbias32(seed)[0]
    total = 0.0
    for start in range(0, n, 1 << 22):  # in chunks, to keep memory small for large n
        s = np.arange(start, min(n, start + (1 << 22)), dtype=np.uint32)
        u = (lowbias32(s ^ key) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
        u = u.astype(ml_dtypes.bfloat16).astype(np.float32)  # points rounded to bf16
        total += float(np.sum(np.float32(4.0) / (np.float32(1.0) + u * u), dtype=np.float64))
    return {"result": np.array([total / n])}


SPEC = Spec(
    kernel="monte_carlo",
    pipeline=["mc_partial", "mc_final"],
    # The seed is a size, so every case draws other points.
    sizes=[
        {"n": 1, "seed": 1},
        {"n": 3, "seed": 2},
        {"n": 1000, "seed": 3},
        {"n": 65_537, "seed": 4},
        {"n": 1_000_003, "seed": 5},
        {"n": 1 << 27, "seed": 6},  # 134M points for timing
    ],
    args={
        # One partial per block of pass 1, sized for the smallest BLOCK*ITEMS of the tune space.
        "partial": Scratch("float32", shape="max(1, cdiv(n, 512))"),
        "result": Out("bfloat16", shape=1, atol=1e-6, rtol=8e-3),
        "n": Scalar("int32"),
        "seed": Scalar("uint32"),
    },
    reference=reference,
    # No memory traffic to speak of: bound by the integer hash (about 10 integer ops a point)
    # and 3 float ops (multiply, add, divide) a point, counted here.
    work=lambda n: {"bytes": 4, "flops": 3 * n},
)
