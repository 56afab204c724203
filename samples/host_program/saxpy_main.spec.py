"""The two kernels of a cuda-samples-style program: `saxpy` and the float instance of the
`scale<T>` template (a spec names an instance as C++ writes it)."""

from kernel_lsp.spec import In, InOut, Scalar, Spec

N_SIZES = [{"n": 1}, {"n": 1000}, {"n": 1_000_003}]
TIMING = [{"n": 1 << 24}]  # 64 MiB per buffer: well past the L2

SPECS = [
    Spec(
        kernel="saxpy",
        sizes=N_SIZES,
        timing_sizes=TIMING,
        args={
            "a": Scalar("float32", 3.0),
            "x": In("float32", shape="n"),
            "y": InOut("float32", shape="n", atol=1e-5, rtol=1e-5),
            "n": Scalar("int32"),
        },
        reference=lambda a, x, y: {"y": a * x + y},
        work=lambda n: {"bytes": 12 * n, "flops": 2 * n, "dtype": "float32"},
    ),
    Spec(
        kernel="scale<float>",
        sizes=N_SIZES,
        timing_sizes=TIMING,
        args={
            "data": InOut("float32", shape="n", atol=1e-6, rtol=1e-6),
            "factor": Scalar("float32", 0.5),
            "n": Scalar("int32"),
        },
        reference=lambda data, factor: {"data": factor * data},
        work=lambda n: {"bytes": 8 * n, "flops": n, "dtype": "float32"},
    ),
]
