"""Spec for vector_add_bf16.cu: the launcher `vector_add_bf16` is called with device buffers; c = a + b,
BF16 in and out, the sum taken in float and rounded once."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="vector_add_bf16",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],
    args={
        "a": In("bfloat16", shape="n"),
        "b": In("bfloat16", shape="n"),
        # One rounding to bf16 (8 significant bits): at most half an ulp, 2^-9 relative.
        "c": Out("bfloat16", shape="n", atol=1e-5, rtol=4e-3),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a + b},
    work=lambda n: {"bytes": 6 * n, "flops": n},
)
