"""Spec for spmv_ell_bf16.cu: y = A x with A square and sparse, in ELLPACK, bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

WIDTH = 16  # slots per row


def col_idx_dist(rng, shape):
    """Column-major WIDTH x rows slots: each row uses a random number of its slots (0 to WIDTH),
    the rest are padding (-1)."""
    rows = shape[0] // WIDTH
    cols = rng.integers(0, rows, (WIDTH, rows))
    used = rng.integers(0, WIDTH + 1, rows)
    cols[np.arange(WIDTH)[:, None] >= used[None, :]] = -1
    return cols.reshape(-1).astype(np.int32)


def reference(col_idx, values, x, rows, width):
    cols = col_idx.reshape(width, rows)
    used = cols >= 0
    products = np.where(used, values.reshape(width, rows).astype(np.float64) * x[np.maximum(cols, 0)], 0.0)
    return {"y": products.sum(axis=0)}


SPEC = Spec(
    kernel="spmv_ell",
    sizes=[{"rows": 1}, {"rows": 3}, {"rows": 1000}, {"rows": 65_537}, {"rows": 2_000_003}],
    args={
        "col_idx": In("int32", shape=f"{WIDTH} * rows", dist=col_idx_dist),
        # Padding slots hold random values too: a kernel that does not skip them fails.
        "values": In("bfloat16", shape=f"{WIDTH} * rows"),
        "x": In("bfloat16", shape="rows"),
        "y": Out("bfloat16", shape="rows", atol=2e-2, rtol=1e-2),
        "rows": Scalar("int32"),
        "width": Scalar("int32", WIDTH),
    },
    reference=reference,
    # Every slot's column and value once (padding included: ELL reads it), x and y once.
    work=lambda rows: {
        "bytes": WIDTH * rows * (2 + 4) + 2 * 2 * rows,
        "flops": 2 * WIDTH * rows,
    },
)
