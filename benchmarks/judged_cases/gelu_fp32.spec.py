"""tanh GELU on a stream: an element a thread and the launcher's own cudaStreamSynchronize, against a strided kernel that leaves the wait to its caller (fp32):
benchmarks/judged_vs_bench.py's case (benchmarks/make_judged_cases.py)."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(x):
    v = x.astype(np.float64)
    return {"y": 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))}


SPEC = Spec(
    entry="gelu_fp32",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("float32", shape="n", dist="uniform(-4, 4)"),
        "y": Out("float32", shape="n", atol=1e-4, rtol=1e-3),
        "n": Scalar("int32"),
    },
    reference=reference,
)
