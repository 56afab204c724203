"""Spec features for real pipelines: one buffer under two parameter names (Alias), sizes derived
from others and cases that must hold a relation (derived_sizes, sizes_valid), distributions that
receive the sizes and the inputs drawn before them."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import CompileResult, KernelResources, Severity, TimingSettings
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.source import find_kernels, parse_directives
from kernel_lsp.spec import In, Out, Scalar, Spec, SpecError, check_spec, load_specs, make_inputs

# Two steps: c = a + b, then out = t + b, where the launcher passes its `c` buffer as `t`.
PIPELINE = """\
// kernel-lsp: launch add1 grid=cdiv(n, 256) block=256
extern "C" __global__ void add1(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
// kernel-lsp: launch add2 grid=cdiv(n, 256) block=256
extern "C" __global__ void add2(const float* t, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] + b[i];
}
"""

ALIAS_SPEC = """\
from kernel_lsp.spec import Alias, In, Out, Scalar, Spec

SPEC = Spec(
    kernel="add1",
    pipeline=["add1", "add2"],
    sizes=[{"n": 1}, {"n": 1000}],
    timing_sizes=[{"n": 4096}],
    args={
        "a": In("float32"),
        "b": In("float32"),
        "c": Out("float32"),
        "t": Alias("c"),
        "out": Out("float32"),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a + b, "out": a + 2 * b},
)
"""


def write_spec(tmp_path, text: str, name: str = "p.spec.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def errors(loaded):
    return [d for d in loaded.diagnostics if d.severity is Severity.ERROR]


def pipeline_artifact(path: str) -> CompileResult:
    kernels = [KernelResources(k, k, "sm_90", 16, 0, 0, 0, 0) for k in ("add1", "add2")]
    return CompileResult(
        path, "sm_90", True, kernels=kernels, cubin=fake_cubin({"add1": "vadd", "add2": "vadd"})
    )


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(fake=True, launch_timeout_s=2.0, timing=TimingSettings(cold_l2=False, budget_s=0.2)) as s:
        yield s


# --- Alias -------------------------------------------------------------------------------------


def test_an_alias_fits_the_kernels_and_passes_one_buffer(gpu, tmp_path):
    cu = tmp_path / "p.cu"
    cu.write_text(PIPELINE)
    loaded = load_specs(write_spec(tmp_path, ALIAS_SPEC))
    assert loaded.ok and not loaded.diagnostics, loaded.diagnostics
    spec = loaded.specs[0]
    assert set(spec.buffers()) == {"a", "b", "c", "out"}  # `t` is not a buffer of its own
    assert check_spec(spec, find_kernels(PIPELINE), parse_directives(PIPELINE)) == []
    [check] = check_file(gpu, str(cu), artifact=pipeline_artifact(str(cu)))
    assert check.ok, check.message


def test_two_declarations_of_one_buffer_fail_where_an_alias_passes(gpu, tmp_path):
    # The obvious spec without Alias: `t` becomes a fresh random buffer, and `out` is wrong.
    cu = tmp_path / "p.cu"
    cu.write_text(PIPELINE)
    write_spec(tmp_path, ALIAS_SPEC.replace('"t": Alias("c")', '"t": In("float32")'))
    [check] = check_file(gpu, str(cu), artifact=pipeline_artifact(str(cu)))
    assert check.status == "failed" and "`out`" in check.message


def test_an_alias_of_nothing_or_of_a_scalar_is_reported_at_its_line(tmp_path):
    text = ALIAS_SPEC.replace('Alias("c")', 'Alias("cc")')
    (d,) = load_specs(write_spec(tmp_path, text)).diagnostics
    assert d.line == 12 and "`cc` is not in args" in d.message
    text = ALIAS_SPEC.replace('Alias("c")', 'Alias("n")')
    (d,) = load_specs(write_spec(tmp_path, text)).diagnostics
    assert d.line == 12 and "`n` is Scalar, not a buffer" in d.message


def test_an_alias_is_checked_as_the_buffer_it_names(tmp_path):
    # `t` is `const float*`; an alias of a bfloat16 buffer is the wrong type, at the alias's line.
    text = ALIAS_SPEC.replace('"c": Out("float32")', '"c": Out("bfloat16")')
    spec = load_specs(write_spec(tmp_path, text)).specs[0]
    messages = {
        d.line: d.message for d in check_spec(spec, find_kernels(PIPELINE), parse_directives(PIPELINE))
    }
    assert "`t` is `const float*` (float32) but the spec says bfloat16" in messages[12]


def test_the_reference_may_name_the_alias_too(tmp_path):
    text = ALIAS_SPEC.replace("lambda a, b:", "lambda a, b, t=None:")
    spec = load_specs(write_spec(tmp_path, text)).specs[0]
    assert spec.aliases() == {"t": "c"} and spec.buffer_name("t") == "c" and spec.buffer_name("a") == "a"


# --- derived sizes and sizes_valid --------------------------------------------------------------


def test_derived_sizes_complete_every_case_and_edge():
    spec = Spec(
        kernel="k",
        sizes=[{"rows": 10}],
        derived_sizes={"nnz": "rows * 4", "total": "nnz + 1"},
        args={"v": In("float32", shape="nnz")},
    )
    assert spec.verification_sizes() == [
        {"rows": 10, "nnz": 40, "total": 41},
        {"rows": 1, "nnz": 4, "total": 5},
        {"rows": 97, "nnz": 388, "total": 389},
    ]
    assert spec.timing_cases() == [{"rows": 10, "nnz": 40, "total": 41}]


def test_sizes_valid_drops_edge_cases_that_break_a_relation():
    spec = Spec(
        kernel="k",
        sizes=[{"rows": 100, "cols": 7}],
        sizes_valid=lambda rows, cols: cols <= rows and cols % 7 == 0,
        edge_sizes=[{"rows": 1, "cols": 7}, {"rows": 14, "cols": 14}],
        args={"v": In("float32", shape="(rows, cols)")},
    )
    assert spec.verification_sizes() == [{"rows": 100, "cols": 7}, {"rows": 14, "cols": 14}]


def test_a_case_of_sizes_that_fails_sizes_valid_is_an_error(tmp_path):
    text = """\
        from kernel_lsp.spec import In, Spec
        SPEC = Spec(
            kernel="k",
            sizes=[{"rows": 10, "nnz": 3}],
            sizes_valid=lambda rows, nnz: nnz >= rows,
            args={"v": In("float32", shape="nnz")},
        )
        """
    (d,) = errors(load_specs(write_spec(tmp_path, text)))
    assert d.line == 2 and "case rows=10, nnz=3 of sizes fails sizes_valid" in d.message


def test_a_derived_size_given_in_sizes_or_not_evaluating_is_an_error(tmp_path):
    base = """\
        from kernel_lsp.spec import In, Spec
        SPEC = Spec(kernel="k", sizes=[{"rows": 10}], derived_sizes=DERIVED, args={"v": In("float32", shape="nnz")})
        """
    (d,) = errors(load_specs(write_spec(tmp_path, base.replace("DERIVED", '{"rows": "3"}'))))
    assert "rows: derived (derived_sizes) and also given in sizes" in d.message
    (d,) = errors(load_specs(write_spec(tmp_path, base.replace("DERIVED", '{"nnz": "rowz * 4"}'))))
    assert "derived_sizes" in d.message and "rowz" in d.message and d.line == 2


# --- distributions that receive the sizes ------------------------------------------------------


CSR = Spec(
    kernel="spmv",
    sizes=[{"rows": 50, "cols": 30, "nnz": 400}],
    sizes_valid=lambda rows, nnz: nnz >= rows,
    args={
        # Row offsets from 0 to nnz, sorted: row lengths vary, empty rows included.
        "row_ptr": In(
            "int32",
            shape="rows + 1",
            dist=lambda rng, rows, nnz: np.concatenate(
                [[0], np.sort(rng.integers(0, nnz + 1, rows - 1)), [nnz]]
            ),
        ),
        "col_idx": In("int32", shape="nnz", dist=lambda rng, shape, cols: rng.integers(0, cols, shape)),
        "x": In("float32", shape="cols"),
        "y": Out("float32", shape="rows"),
        "rows": Scalar("int32"),
    },
)


@pytest.mark.parametrize("sizes", [*CSR.verification_sizes(), {"rows": 3, "cols": 1, "nnz": 3}])
def test_csr_inputs_are_consistent_at_every_case(sizes):
    for run in (0, 1):
        x = make_inputs(CSR, sizes, seed=5, run=run)
        row_ptr, col_idx = x["row_ptr"], x["col_idx"]
        assert row_ptr.shape == (sizes["rows"] + 1,) and row_ptr[0] == 0 and row_ptr[-1] == sizes["nnz"]
        assert np.all(np.diff(row_ptr) >= 0)
        assert col_idx.min() >= 0 and col_idx.max() < sizes["cols"]


def test_a_distribution_may_name_the_inputs_drawn_before_it():
    spec = Spec(
        kernel="k",
        sizes=[{"n": 64}],
        args={
            "keys": In("int32", shape="n", dist="randint(0, 9)"),
            # a permutation that sorts keys: depends on the array drawn just before
            "order": In("int32", shape="n", dist=lambda keys: np.argsort(keys, kind="stable")),
            "also": In("int32", shape="n", dist=lambda inputs, shape: inputs["keys"][::-1]),
        },
    )
    x = make_inputs(spec, {"n": 64}, seed=1)
    assert np.all(np.diff(x["keys"][x["order"]]) >= 0)
    assert np.array_equal(x["also"], x["keys"][::-1])


def test_the_two_argument_form_keeps_working_whatever_its_names():
    spec = Spec(kernel="k", sizes=[{"n": 5}], args={"a": In("float32", dist=lambda g, s: np.full(s, 2.0))})
    assert np.all(make_inputs(spec, {"n": 5}, seed=0)["a"] == 2.0)


def test_a_distribution_naming_an_unknown_size_says_what_is_there():
    spec = Spec(
        kernel="k", sizes=[{"n": 5}], args={"a": In("float32", dist=lambda rng, shape, m: rng.random(shape))}
    )
    with pytest.raises(SpecError, match="takes m, which is neither"):
        make_inputs(spec, {"n": 5}, seed=0)


def test_the_isolated_summary_keeps_the_cases_sizes_valid_chose(tmp_path):
    from kernel_lsp.spec.isolated import load_specs_isolated

    text = """\
from kernel_lsp.spec import Alias, In, Spec
SPEC = Spec(
    kernel="k",
    sizes=[{"rows": 100, "cols": 7}],
    sizes_valid=lambda rows, cols: cols % 7 == 0,
    derived_sizes={"n": "rows * cols"},
    args={"v": In("float32", shape="n"), "w": Alias("v")},
)
"""
    path = tmp_path / "k.spec.py"
    path.write_text(text)
    (spec,) = load_specs_isolated(str(path)).specs
    # The function stayed in the worker; the edge cases it rejected (cols 1 and 97) stay out.
    assert spec.sizes_valid is None and spec.aliases() == {"w": "v"}
    assert spec.verification_sizes() == [{"rows": 100, "cols": 7, "n": 700}]
