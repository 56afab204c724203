"""a row's layer norm: row statistics a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x, gamma, beta, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x64 - mean) / np.sqrt(var + eps) * gamma.astype(np.float64) + beta.astype(np.float64)}


SPEC = Spec(
    entry="layernorm_bf16",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 8192, "cols": 1024}],
    args={
        "x": In("bfloat16", shape="(rows, cols)"),
        "gamma": In("bfloat16", shape="cols"),
        "beta": In("bfloat16", shape="cols"),
        "y": Out("bfloat16", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", value=1e-5),
    },
    reference=reference,
)
