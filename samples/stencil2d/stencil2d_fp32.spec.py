"""Spec for stencil2d_fp32.cu: one 5-point Jacobi step with a zero boundary, FP32."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(src):
    p = np.pad(src, 1)  # the zero boundary
    neighbours = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
    return {"dst": 0.5 * src + 0.125 * neighbours}


SPEC = Spec(
    kernel="stencil2d",
    sizes=[
        {"ny": 1, "nx": 1},
        {"ny": 3, "nx": 7},
        {"ny": 37, "nx": 1000},
        {"ny": 129, "nx": 4099},
        {"ny": 8192, "nx": 4096},  # 32M points for timing
    ],
    args={
        "src": In("float32", shape="(ny, nx)"),
        "dst": Out("float32", shape="(ny, nx)", atol=1e-6, rtol=1e-5),
        "ny": Scalar("int32"),
        "nx": Scalar("int32"),
    },
    reference=reference,
    # Each point read once (neighbours from cache) and written once; 4 adds, 2 multiplies, 1 add.
    work=lambda ny, nx: {"bytes": 2 * 4 * ny * nx, "flops": 7 * ny * nx},
)
