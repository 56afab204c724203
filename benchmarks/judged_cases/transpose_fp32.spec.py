"""dst = src^T: coalesced reads and writes a row apart, against 32x32 tiles through shared memory (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="transpose_fp32",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 100}, {"rows": 300, "cols": 65}],
    timing_sizes=[{"rows": 4096, "cols": 4096}],
    args={
        "src": In("float32", shape="(rows, cols)"),
        "dst": Out("float32", shape="(cols, rows)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda src: {"dst": np.ascontiguousarray(src.T)},
)
