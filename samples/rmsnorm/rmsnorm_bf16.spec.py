"""Spec for rmsnorm_bf16.cu: y = x / sqrt(mean(x^2, row) + eps) * weight, bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x, weight, eps):
    rms = np.sqrt(np.mean(x * x, axis=1, keepdims=True, dtype=np.float64) + eps)
    return {"y": x / rms * weight}


SPEC = Spec(
    kernel="rmsnorm",
    sizes=[
        {"rows": 1, "cols": 1},
        {"rows": 3, "cols": 7},
        {"rows": 37, "cols": 1000},
        {"rows": 129, "cols": 4099},
        {"rows": 8192, "cols": 4096},  # 32M elements for timing
    ],
    args={
        "x": In("bfloat16", shape="(rows, cols)"),
        "weight": In("bfloat16", shape="cols", dist=["normal", "positive"]),
        "y": Out("bfloat16", shape="(rows, cols)", atol=1e-2, rtol=1e-2),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", 1e-6),
    },
    reference=reference,
    # x read and y written once at the least (weight is small); square, add, scale, weight.
    work=lambda rows, cols: {"bytes": 2 * (2 * rows * cols + cols), "flops": 4 * rows * cols},
)
