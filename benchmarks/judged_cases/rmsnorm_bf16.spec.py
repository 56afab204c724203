"""a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x, w, eps):
    x64 = x.astype(np.float64)
    scale = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return {"y": x64 * scale * w.astype(np.float64)}


SPEC = Spec(
    entry="rmsnorm_bf16",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 4096, "cols": 4096}],
    args={
        "x": In("bfloat16", shape="(rows, cols)"),
        "w": In("bfloat16", shape="cols"),
        "y": Out("bfloat16", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", value=1e-6),
    },
    reference=reference,
)
