"""Spec for layernorm_fp32.cu: the launcher `layernorm_fp32` (three kernels, host steps between them)
is called with device buffers; the reference is numpy in float64."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

EPS = 1e-5


def layernorm(x, gamma, beta):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x64 - mean) / np.sqrt(var + EPS) * gamma + beta}


SPEC = Spec(
    entry="layernorm_fp32",
    sizes=[
        {"rows": 3, "cols": 1000},
        {"rows": 64, "cols": 257},
        {"rows": 500, "cols": 4099},
        {"rows": 4096, "cols": 4096},
    ],
    args={
        "x": In("float32", shape=("rows", "cols")),
        "gamma": In("float32", shape="cols"),
        "beta": In("float32", shape="cols"),
        "y": Out("float32", shape=("rows", "cols"), atol=1e-4, rtol=1e-3),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", value=EPS),
    },
    reference=layernorm,
    work=lambda rows, cols: {"bytes": 8 * rows * cols + 8 * cols, "flops": 8 * rows * cols},
)
