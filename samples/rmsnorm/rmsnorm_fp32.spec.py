"""Spec for rmsnorm_fp32.cu: y = x / sqrt(mean(x^2, row) + eps) * weight, FP32."""

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
        "x": In("float32", shape="(rows, cols)"),
        "weight": In("float32", shape="cols", dist=["normal", "positive"]),
        "y": Out("float32", shape="(rows, cols)", atol=1e-5, rtol=1e-4),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", 1e-6),
    },
    reference=reference,
    # x read and y written once at the least (weight is small); square, add, scale, weight.
    work=lambda rows, cols: {"bytes": 4 * (2 * rows * cols + cols), "flops": 4 * rows * cols},
)
