"""Spec for transpose_bf16.cu: dst = src.T for a rows x cols row-major matrix."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="transpose",
    sizes=[
        {"rows": 1, "cols": 1},
        {"rows": 1, "cols": 1000},
        {"rows": 33, "cols": 17},
        {"rows": 257, "cols": 1031},
        {"rows": 258, "cols": 1032},  # even, not a multiple of any tile: paired edge tiles
        {"rows": 4096, "cols": 8192},  # 32M elements for timing
    ],
    args={
        "src": In("bfloat16", shape="(rows, cols)"),
        "dst": Out("bfloat16", shape="(cols, rows)", atol=0, rtol=0),  # a copy: exact
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda src: {"dst": src.T},
    work=lambda rows, cols: {"bytes": 4 * rows * cols, "flops": 0},
)
