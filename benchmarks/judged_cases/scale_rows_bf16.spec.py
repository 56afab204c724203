"""y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread (bf16):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="scale_rows_bf16",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 16384, "cols": 512}],
    args={
        "x": In("bfloat16", shape="(rows, cols)"),
        "s": In("bfloat16", shape="rows"),
        "y": Out("bfloat16", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda x, s: {"y": x.astype(np.float32) * s.astype(np.float32)[:, None]},
)
