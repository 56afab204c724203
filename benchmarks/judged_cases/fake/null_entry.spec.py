"""The null entry (benchmarks/judged_vs_bench.py): one element written."""

import numpy as np

from kernel_lsp.spec import Out, Scalar, Spec

SPEC = Spec(
    entry="null_entry",
    sizes=[{"n": 1}],
    args={"out": Out("float32", shape=1), "n": Scalar("int32")},
    reference=lambda: {"out": np.ones(1, dtype=np.float32)},
)
