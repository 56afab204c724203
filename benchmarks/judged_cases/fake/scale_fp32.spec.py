"""y = 2 x on the fake GPU (benchmarks/judged_vs_bench.py --fake)."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="scale_fp32",
    sizes=[{"n": 1}, {"n": 1000}],
    timing_sizes=[{"n": 1 << 16}],
    args={"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
