"""Spec for layernorm_bf16.cu: y = (x - mean) / sqrt(var + eps) * weight + bias, per row, bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x, weight, bias, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)  # biased, as torch
    return {"y": (x64 - mean) / np.sqrt(var + eps) * weight + bias}


SPEC = Spec(
    kernel="layernorm",
    sizes=[
        {"rows": 1, "cols": 1},
        {"rows": 3, "cols": 7},
        {"rows": 37, "cols": 1000},
        {"rows": 129, "cols": 4099},
        {"rows": 8192, "cols": 4096},  # 32M elements for timing
    ],
    args={
        # An offset mean too: a one-pass sum-of-squares variance would lose digits there.
        "x": In("bfloat16", shape="(rows, cols)", dist=["normal", "uniform(-1, 1)", "uniform(3, 5)"]),
        "weight": In("bfloat16", shape="cols", dist=["normal", "positive"]),
        "bias": In("bfloat16", shape="cols"),
        "y": Out("bfloat16", shape="(rows, cols)", atol=2e-2, rtol=1e-2),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", 1e-5),
    },
    reference=reference,
    # x read and y written once at the least (weight, bias are small); about 8 flops an element.
    work=lambda rows, cols: {"bytes": 2 * (2 * rows * cols + 2 * cols), "flops": 8 * rows * cols},
)
