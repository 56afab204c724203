"""Spec for silu_and_mul_bf16.cu: out = silu(x[:, :d]) * x[:, d:], bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x, d):
    gate, up = x[:, :d], x[:, d:]
    return {"out": gate / (1.0 + np.exp(-gate)) * up}


SPEC = Spec(
    kernel="silu_and_mul",
    sizes=[
        {"rows": 1, "d": 1},
        {"rows": 3, "d": 7},
        {"rows": 37, "d": 1000},
        {"rows": 129, "d": 4099},
        {"rows": 4096, "d": 4096},  # x has 32M elements, for timing
    ],
    args={
        "x": In("bfloat16", shape="(rows, 2 * d)", dist=["normal", "uniform(-8, 8)"]),
        "out": Out("bfloat16", shape="(rows, d)", atol=1e-3, rtol=1e-2),
        "rows": Scalar("int32"),
        "d": Scalar("int32"),
    },
    reference=reference,
    # 2d elements read and d written per row; exp, add, divide, multiply, negate per output.
    work=lambda rows, d: {"bytes": 2 * 3 * rows * d, "flops": 5 * rows * d},
)
