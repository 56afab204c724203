"""Spec for l2_normalize_coop.cu: the launcher `l2_normalize` (one cooperative launch) is called with
device buffers; y = x / sqrt(sum(x^2) + eps), the reference in float64."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec

EPS = 1e-12


def l2_normalize(x):
    x64 = x.astype(np.float64)
    return {"y": x64 / np.sqrt((x64 * x64).sum() + EPS)}


SPEC = Spec(
    entry="l2_normalize",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 24}],
    args={
        "x": In("float32", shape="n"),
        # The elements are about 1/sqrt(n) (2.4e-4 at the timing size): a relative tolerance.
        "y": Out("float32", shape="n", atol=1e-8, rtol=1e-3),
        "n": Scalar("int32"),
        "eps": Scalar("float32", value=EPS),
    },
    reference=l2_normalize,
    work=lambda n: {"bytes": 8 * n, "flops": 3 * n},
)
