"""Spec for softmax_fp32.cu: y = softmax(x) along each row of a rows x cols matrix."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


SPEC = Spec(
    kernel="softmax",
    sizes=[
        {"rows": 1, "cols": 1},
        {"rows": 3, "cols": 7},
        {"rows": 37, "cols": 1000},
        {"rows": 129, "cols": 4099},
        {"rows": 8192, "cols": 4096},  # 32M elements for timing
    ],
    args={
        # Large logits too: without the max subtraction exp() would overflow.
        "x": In("float32", shape="(rows, cols)", dist=["normal", "uniform(-1, 1)", "uniform(-80, 80)"]),
        "y": Out("float32", shape="(rows, cols)", atol=1e-6, rtol=1e-4),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=reference,
    # x read once and y written once at the least; exp, subtract, sum, multiply per element.
    work=lambda rows, cols: {"bytes": 8 * rows * cols, "flops": 5 * rows * cols},
)
