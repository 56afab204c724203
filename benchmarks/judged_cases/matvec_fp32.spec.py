"""y = A x: a thread a row (loads a row apart), against a warp a row (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="matvec_fp32",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}, {"rows": 1000, "cols": 33}],
    timing_sizes=[{"rows": 8192, "cols": 4096}],
    args={
        "A": In("float32", shape="(rows, cols)", dist="uniform(-1, 1)"),
        "x": In("float32", shape="cols", dist="uniform(-1, 1)"),
        "y": Out("float32", shape="rows", atol=1e-3, rtol=1e-3),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda A, x: {"y": A.astype(np.float64) @ x.astype(np.float64)},
)
