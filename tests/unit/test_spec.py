"""Spec loading, its diagnostics, the check against the kernel signature, inputs and references."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kernel_lsp.skeleton import spec_skeleton
from kernel_lsp.source import find_kernels, parse_directives
from kernel_lsp.spec import (
    In,
    Spec,
    SpecError,
    check_spec,
    eval_shape,
    load_specs,
    make_inputs,
    run_reference,
    source_constants,
)

CU = textwrap.dedent(
    """\
    #define BLOCK 256
    // kernel-lsp: launch vadd grid=cdiv(n, BLOCK) block=BLOCK
    __global__ void vadd(const float* a, const float* b, float* c, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) c[i] = a[i] + b[i];
    }
    """
)
GOOD = textwrap.dedent(
    """\
    from kernel_lsp.spec import In, Out, Scalar, Spec
    SPEC = Spec(
        kernel="vadd",
        sizes=[{"n": 1}, {"n": 1000}],
        args={
            "a": In("float32", shape="n"),
            "b": In("float32", shape="n", dist="uniform(-1, 1)"),
            "c": Out("float32", shape="n"),
            "n": Scalar("int32"),
        },
        reference=lambda a, b: {"c": a + b},
    )
    """
)


def write(tmp_path, text, name="vadd.spec.py"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_good_spec_loads_with_arg_lines(tmp_path):
    loaded = load_specs(write(tmp_path, GOOD))
    assert loaded.ok and not loaded.diagnostics
    spec = loaded.specs[0]
    assert spec.line == 2 and spec.path.endswith("vadd.spec.py")
    assert [a.line for a in spec.args.values()] == [6, 7, 8, 9]
    assert check_spec(spec, find_kernels(CU), parse_directives(CU), source_constants(CU)) == []


def test_exception_points_at_the_raising_line(tmp_path):
    loaded = load_specs(write(tmp_path, "import numpy\n\nx = 1 / 0\n"))
    (d,) = loaded.diagnostics
    assert d.line == 3 and "ZeroDivisionError" in d.message and not loaded.ok


def test_syntax_error_and_missing_spec(tmp_path):
    (d,) = load_specs(write(tmp_path, "SPEC = (\n")).diagnostics
    assert d.code == "spec-syntax"
    (d,) = load_specs(write(tmp_path, "X = 1\n")).diagnostics
    assert "neither SPEC" in d.message


def test_unsaved_source_wins_over_disk(tmp_path):
    path = write(tmp_path, "raise RuntimeError('old')\n")
    assert load_specs(path, source=GOOD).ok


def test_bad_dtype_and_shape_at_the_arg_line(tmp_path):
    text = GOOD.replace('In("float32", shape="n")', 'In("float33", shape="n")').replace(
        'Out("float32", shape="n")', 'Out("float32", shape="m")'
    )
    diags = load_specs(write(tmp_path, text)).diagnostics
    by_line = {d.line: d.message for d in diags}
    assert "unknown dtype `float33`" in by_line[6]
    assert "name 'm' is not defined" in by_line[8]


def test_bad_distribution(tmp_path):
    text = GOOD.replace('dist="uniform(-1, 1)"', 'dist="gauss"')
    (d,) = load_specs(write(tmp_path, text)).diagnostics
    assert d.line == 7 and "unknown distribution" in d.message


def test_check_spec_against_signature(tmp_path):
    text = GOOD.replace('"b": In("float32", shape="n", dist="uniform(-1, 1)"),', '"b": In("bfloat16"),')
    text = text.replace('"n": Scalar("int32"),', '"n": Scalar("int32"),\n        "extra": In("float32"),')
    spec = load_specs(write(tmp_path, text)).specs[0]
    msgs = {
        d.line: d.message for d in check_spec(spec, find_kernels(CU), parse_directives(CU), {"BLOCK": 256})
    }
    assert "`b` is `const float*` (float32) but the spec says bfloat16" in msgs[7]
    assert "`extra` is not a parameter of vadd" in msgs[10]


def test_missing_param_pointer_scalar_and_launch(tmp_path):
    text = GOOD.replace('"n": Scalar("int32"),', "").replace(
        '"c": Out("float32", shape="n")', '"c": Scalar("float32")'
    )
    spec = load_specs(write(tmp_path, text)).specs[0]
    cu_without_launch = CU.replace("kernel-lsp: launch", "launch")
    msgs = [d.message for d in check_spec(spec, find_kernels(CU), parse_directives(cu_without_launch))]
    assert any("parameter `int n` has no entry" in m for m in msgs)
    assert any("`c` is a pointer" in m for m in msgs)
    assert any("no `// kernel-lsp: launch vadd" in m for m in msgs)


def test_launch_constants_needed(tmp_path):
    spec = load_specs(write(tmp_path, GOOD)).specs[0]
    msgs = [d.message for d in check_spec(spec, find_kernels(CU), parse_directives(CU))]
    assert any("name 'BLOCK' is not defined" in m for m in msgs)
    assert source_constants(CU, ["BLOCK=128"]) == {"BLOCK": 128}


def test_inputs_are_fresh_per_run_and_deterministic(tmp_path):
    spec = load_specs(write(tmp_path, GOOD)).specs[0]
    x0, x1 = make_inputs(spec, {"n": 1000}, 1, 0), make_inputs(spec, {"n": 1000}, 1, 1)
    assert not np.array_equal(x0["a"], x1["a"])
    assert np.array_equal(x0["a"], make_inputs(spec, {"n": 1000}, 1, 0)["a"])
    assert not np.array_equal(x0["a"], make_inputs(spec, {"n": 1000}, 2, 0)["a"])
    assert np.all(np.abs(x0["b"]) <= 1)
    out = run_reference(spec, {"n": 1000}, x0)
    np.testing.assert_allclose(out["c"], x0["a"] + x0["b"])


def test_verification_sizes_add_edges():
    spec = Spec(kernel="k", sizes=[{"n": 1000}], args={"a": In("float32")})
    assert spec.verification_sizes() == [{"n": 1000}, {"n": 1}, {"n": 97}]
    assert spec.timing_cases() == [{"n": 1000}]


def test_bf16_inputs_reach_the_reference_as_float32(tmp_path):
    text = GOOD.replace('In("float32", shape="n")', 'In("bfloat16", shape="n")').replace(
        'lambda a, b: {"c": a + b}', "lambda a, b: {\"c\": (a + b) if a.dtype == 'float32' else None}"
    )
    spec = load_specs(write(tmp_path, text)).specs[0]
    x = make_inputs(spec, {"n": 5}, 0)
    assert str(x["a"].dtype) == "bfloat16"
    assert run_reference(spec, {"n": 5}, x)["c"].dtype == np.float32


def test_reference_errors_are_plain(tmp_path):
    spec = load_specs(write(tmp_path, GOOD.replace('{"c": a + b}', '{"d": a}'))).specs[0]
    with pytest.raises(SpecError, match="returned no `c`"):
        run_reference(spec, {"n": 3}, make_inputs(spec, {"n": 3}, 0))


def test_shapes():
    assert eval_shape("(m, cdiv(n, 4))", {"m": 2, "n": 9}) == (2, 3)
    assert eval_shape(("m", "n"), {"m": 2, "n": 9}) == (2, 9)
    with pytest.raises(SpecError):
        eval_shape("n - 10", {"n": 1})


def test_skeleton_loads_and_matches_the_kernel(tmp_path):
    sig = find_kernels(CU)[0]
    text = spec_skeleton(sig, parse_directives(""))
    assert "kernel-lsp: launch vadd" in text  # suggests the missing launch line
    loaded = load_specs(write(tmp_path, text))
    assert loaded.ok, loaded.diagnostics
    assert check_spec(loaded.specs[0], sig, parse_directives(CU), source_constants(CU)) == []
