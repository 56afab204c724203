"""Spec for rope_bf16.cu: rotary position embedding, rotate-half layout, bf16 in and out, float math."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def angles(shape):
    """Real RoPE angles: token t, pair i of `half` -> t * 10000^(-i / half)."""
    tokens, half = shape
    inv_freq = 10000.0 ** (-np.arange(half, dtype=np.float64) / half)
    return np.arange(tokens, dtype=np.float64)[:, None] * inv_freq[None, :]


def reference(x, cos_table, sin_table, head_dim):
    half = head_dim // 2
    c, s = cos_table[:, None, :], sin_table[:, None, :]  # broadcast over heads
    a, b = x[..., :half], x[..., half:]
    return {"out": np.concatenate([a * c - b * s, b * c + a * s], axis=-1)}


SPEC = Spec(
    kernel="rope",
    sizes=[
        {"tokens": 1, "heads": 1, "head_dim": 2},
        {"tokens": 3, "heads": 2, "head_dim": 8},
        {"tokens": 17, "heads": 5, "head_dim": 64},
        {"tokens": 129, "heads": 7, "head_dim": 130},
        {"tokens": 4096, "heads": 32, "head_dim": 128},  # 16M elements for timing
    ],
    # head_dim must be even, so the default edge sizes (all 1, all 97) do not apply.
    edge_sizes=[{"tokens": 97, "heads": 97, "head_dim": 2}, {"tokens": 1, "heads": 97, "head_dim": 98}],
    args={
        "x": In("bfloat16", shape="(tokens, heads, head_dim)"),
        "cos_table": In(
            "bfloat16", shape="(tokens, head_dim // 2)", dist=lambda rng, shape: np.cos(angles(shape))
        ),
        "sin_table": In(
            "bfloat16", shape="(tokens, head_dim // 2)", dist=lambda rng, shape: np.sin(angles(shape))
        ),
        "out": Out("bfloat16", shape="(tokens, heads, head_dim)", atol=1e-2, rtol=1e-2),
        "tokens": Scalar("int32"),
        "heads": Scalar("int32"),
        "head_dim": Scalar("int32"),
    },
    reference=reference,
    # x read and out written once, the tables once; 3 flops per output element.
    work=lambda tokens, heads, head_dim: {
        "bytes": 2 * (2 * tokens * heads * head_dim + tokens * head_dim),
        "flops": 3 * tokens * heads * head_dim,
    },
)
