"""Spec for vector_add_fp32.cu: c = a + b, FP32."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vector_add",
    # 1, a prime, a non-multiple of every block and vector size, and 32M elements for timing.
    sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        "a": In("float32", shape="n"),
        "b": In("float32", shape="n"),
        "c": Out("float32", shape="n", atol=1e-6, rtol=1e-6),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a + b},
    work=lambda n: {"bytes": 12 * n, "flops": n},
)
