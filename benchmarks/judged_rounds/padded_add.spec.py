"""c = a + b, about 13 us on an H100 at the timing size: the original of benchmarks/judged_rounds.py
also reads `pad` (0.3 n floats that never change the result), its honest rewrite does not, so
the rewrite is about 1.10x faster (12 n bytes against 13.2 n)."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="padded_add",
    sizes=[{"n": 1, "m": 1}, {"n": 1000, "m": 300}, {"n": 100_003, "m": 30_000}],
    timing_sizes=[{"n": 3 << 20, "m": (3 << 20) * 3 // 10}],
    args={
        "a": In("float32", shape="n"),
        "b": In("float32", shape="n"),
        "pad": In("float32", shape="m", dist="uniform(-1, 1)"),
        "c": Out("float32", shape="n"),
        "n": Scalar("int32"),
        "m": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a + b},
)
