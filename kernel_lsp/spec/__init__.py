"""Kernel specs: what a kernel must compute, in a Python sidecar file beside the `.cu`.

`samples/vector_add/vadd_fp32.cu` is checked by `samples/vector_add/vadd_fp32.spec.py`::

    from kernel_lsp.spec import Spec, In, Out, Scalar
    SPEC = Spec(
        kernel="vadd",
        sizes=[{"n": 1}, {"n": 1000}, {"n": 1_000_003}, {"n": 1 << 24}],
        args={
            "a": In("float32", shape="n"),
            "b": In("float32", shape="n", dist="uniform(-1, 1)"),
            "c": Out("float32", shape="n", atol=1e-6, rtol=1e-5),
            "n": Scalar("int32"),
        },
        reference=lambda a, b: {"c": a + b},
        work=lambda n: {"bytes": 12 * n, "flops": n},
    )

The launch itself lives in the `.cu` (`// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256`).
The format is documented in docs/specs.md. This package is pure Python + numpy + ml_dtypes (the
GPU worker imports it too), and never touches CUDA.

The package splits by job: `model` (the public API above), `dtypes`, `expressions` (sizes, shapes,
launch dimensions), `inputs` (distributions, the reference), `loading` (running a spec file) and
`checking` (a spec against its kernels). Users import from `kernel_lsp.spec`.
"""

from .checking import check_entry_spec, check_spec
from .dtypes import C_TYPES, DTYPES, FLOAT_DTYPES, c_type_dtype, default_tolerance
from .expressions import (
    SpecError,
    call_with_names,
    cdiv,
    eval_expr,
    eval_shape,
    launch_dims,
    source_constants,
)
from .inputs import (
    DEFAULT_FLOAT_DISTS,
    DEFAULT_SIGNED_DISTS,
    DEFAULT_UNSIGNED_DISTS,
    check_distribution,
    distributions,
    host_view,
    make_inputs,
    run_reference,
    sample,
)
from .loading import SPEC_SOURCE, SpecLoad, load_specs, spec_path_for
from .model import Alias, Arg, Compare, Distribution, In, InOut, Out, Scalar, Scratch, Spec, case_label

__all__ = [
    "C_TYPES",
    "DEFAULT_FLOAT_DISTS",
    "DEFAULT_SIGNED_DISTS",
    "DEFAULT_UNSIGNED_DISTS",
    "DTYPES",
    "FLOAT_DTYPES",
    "SPEC_SOURCE",
    "Alias",
    "Arg",
    "Compare",
    "Distribution",
    "In",
    "InOut",
    "Out",
    "Scalar",
    "Scratch",
    "Spec",
    "SpecError",
    "SpecLoad",
    "c_type_dtype",
    "call_with_names",
    "case_label",
    "cdiv",
    "check_distribution",
    "check_entry_spec",
    "check_spec",
    "default_tolerance",
    "distributions",
    "eval_expr",
    "eval_shape",
    "host_view",
    "launch_dims",
    "load_specs",
    "make_inputs",
    "run_reference",
    "sample",
    "source_constants",
    "spec_path_for",
]
