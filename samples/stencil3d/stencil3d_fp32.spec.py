"""Spec for stencil3d_fp32.cu: one 7-point Jacobi step with a zero boundary, FP32."""

import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(src):
    p = np.pad(src, 1)  # the zero boundary
    c = (slice(1, -1),) * 3
    neighbours = sum(
        p[tuple(slice(0, -2) if a == axis else c[a] for a in range(3))]
        + p[tuple(slice(2, None) if a == axis else c[a] for a in range(3))]
        for axis in range(3)
    )
    return {"dst": 0.4 * src + 0.1 * neighbours}


SPEC = Spec(
    kernel="stencil3d",
    sizes=[
        {"nz": 1, "ny": 1, "nx": 1},
        {"nz": 3, "ny": 5, "nx": 7},
        {"nz": 17, "ny": 33, "nx": 67},
        {"nz": 61, "ny": 127, "nx": 259},
        {"nz": 256, "ny": 256, "nx": 512},  # 32M points for timing
    ],
    args={
        "src": In("float32", shape="(nz, ny, nx)"),
        "dst": Out("float32", shape="(nz, ny, nx)", atol=1e-6, rtol=1e-5),
        "nz": Scalar("int32"),
        "ny": Scalar("int32"),
        "nx": Scalar("int32"),
    },
    reference=reference,
    # Each point read once (neighbours from cache) and written once; 6 adds, 2 multiplies, 1 add.
    work=lambda nz, ny, nx: {"bytes": 2 * 4 * nz * ny * nx, "flops": 9 * nz * ny * nx},
)
