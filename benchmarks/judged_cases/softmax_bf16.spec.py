"""a row's softmax: a thread a row (three passes, loads a row apart), against a block a row (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


SPEC = Spec(
    entry="softmax_bf16",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 4096, "cols": 1024}],
    args={
        "x": In("bfloat16", shape="(rows, cols)", dist="uniform(-4, 4)"),
        "y": Out("bfloat16", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=reference,
)
