"""Spec for spmv_csr_bf16.cu: y = A x with A square and sparse, in CSR, bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

NNZ_PER_ROW = 16  # on average; row lengths vary from 0 to several times this


def row_ptr_dist(rng, shape):
    """Valid CSR row offsets for shape (rows + 1,): 0, sorted random cut points, nnz. Row
    lengths come out uneven (empty rows included), as in real matrices."""
    rows = shape[0] - 1
    nnz = NNZ_PER_ROW * rows
    cuts = np.sort(rng.integers(0, nnz + 1, max(rows - 1, 0)))
    return np.concatenate([[0], cuts, [nnz]]).astype(np.int32)


def col_idx_dist(rng, shape):
    """Column indices in [0, rows) for the NNZ_PER_ROW * rows stored elements."""
    rows = shape[0] // NNZ_PER_ROW
    return rng.integers(0, rows, shape).astype(np.int32)


def reference(row_ptr, col_idx, values, x, rows):
    row_of = np.repeat(np.arange(rows), np.diff(row_ptr))
    products = values.astype(np.float64) * x[col_idx]
    return {"y": np.bincount(row_of, weights=products, minlength=rows)}


SPEC = Spec(
    kernel="spmv_csr",
    sizes=[{"rows": 1}, {"rows": 3}, {"rows": 1000}, {"rows": 65_537}, {"rows": 2_000_003}],
    args={
        "row_ptr": In("int32", shape="rows + 1", dist=row_ptr_dist),
        "col_idx": In("int32", shape=f"{NNZ_PER_ROW} * rows", dist=col_idx_dist),
        "values": In("bfloat16", shape=f"{NNZ_PER_ROW} * rows"),
        "x": In("bfloat16", shape="rows"),
        "y": Out("bfloat16", shape="rows", atol=2e-2, rtol=1e-2),
        "rows": Scalar("int32"),
    },
    reference=reference,
    # Each stored element's value and column once, row_ptr, x and y once; a multiply-add each.
    work=lambda rows: {
        "bytes": NNZ_PER_ROW * rows * (2 + 4) + 4 * (rows + 1) + 2 * 2 * rows,
        "flops": 2 * NNZ_PER_ROW * rows,
    },
)
