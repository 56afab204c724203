"""The sample suite, checked without a GPU: every kernel compiles cleanly with NVRTC (with its
default tunables and with each tunable varied), every spec loads and fits its kernel, every launch
line evaluates to a legal launch over the whole tune space, every reference agrees with an
independent numpy/Python computation on small sizes, and samples/broken gives the findings its
files promise."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kernel_lsp.compile import CompileOptions, compile_file
from kernel_lsp.model import Severity
from kernel_lsp.source import Directives, LaunchDirective, find_kernels, parse_directives
from kernel_lsp.spec import (
    FLOAT_DTYPES,
    In,
    InOut,
    Scalar,
    Scratch,
    Spec,
    check_spec,
    eval_shape,
    launch_dims,
    load_specs,
    make_inputs,
    run_reference,
    spec_path_for,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BROKEN = SAMPLES / "broken"
# Host code, a CMake project, a PyTorch extension: tests/integration/test_real_samples.py checks them;
# launchers with entry specs: tests/integration/test_entry_samples.py.
REAL_WORLD = [
    SAMPLES / "host_program",
    SAMPLES / "cmake_project",
    SAMPLES / "torch_extension",
    SAMPLES / "entries",
]
CLEAN = sorted(
    p
    for p in SAMPLES.rglob("*.cu")
    if BROKEN not in p.parents and not any(d in p.parents for d in REAL_WORLD)
)
IDS = [str(p.relative_to(SAMPLES)) for p in CLEAN]

# Issue 7's suite (plus reduce_sum from issue 2): every family in FP32 and BF16.
FAMILIES = [
    "vector_add", "dot", "transpose", "gemm", "scan", "reduce_sum",
    "softmax", "rmsnorm", "layernorm", "silu_and_mul", "rope",
    "spmv_csr", "spmv_ell",
    "stencil2d", "stencil3d", "monte_carlo",
]  # fmt: skip


def family(cu: Path) -> str:
    return cu.parent.name


def tune_defaults(directives: Directives) -> dict[str, int]:
    """The naive configuration: the first value of every tunable."""
    return {name: int(values[0]) for name, values in directives.tune_space.items()}


def tune_points(directives: Directives) -> list[dict[str, int]]:
    space = directives.tune_space
    names = list(space)
    return [
        dict(zip(names, (int(v) for v in combo), strict=True))
        for combo in itertools.product(*(space[n] for n in names))
    ]


def bind(expr: str, values: dict[str, int]) -> str:
    """A launch expression with the tunables written in as numbers."""
    for name, value in values.items():
        expr = re.sub(rf"\b{name}\b", str(value), expr)
    return expr


def bound_directives(directives: Directives, values: dict[str, int]) -> Directives:
    launches = [
        LaunchDirective(d.kernel, bind(d.grid, values), bind(d.block, values), bind(d.smem, values), d.line)
        for d in directives.launches
    ]
    return Directives(launches, directives.tunables, directives.problems)


def load_spec(cu: Path) -> Spec:
    loaded = load_specs(spec_path_for(str(cu)))
    assert loaded.ok, [d.message for d in loaded.diagnostics]
    assert len(loaded.specs) == 1
    return loaded.specs[0]


# --- the suite is complete ----------------------------------------------------------------------


def test_every_family_has_fp32_and_bf16_with_a_spec() -> None:
    for fam in FAMILIES:
        for dtype in ("fp32", "bf16"):
            cu = SAMPLES / fam / f"{fam}_{dtype}.cu"
            assert cu.exists(), cu
            assert Path(spec_path_for(str(cu))).exists(), f"no spec beside {cu}"
    assert {family(p) for p in CLEAN} == set(FAMILIES)


def test_readme_lists_every_sample() -> None:
    readme = (SAMPLES / "README.md").read_text()
    for cu in CLEAN:
        assert str(cu.relative_to(SAMPLES)) in readme, f"{cu.name} missing from samples/README.md"


# --- compiling ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_sample_compiles_cleanly(cu: Path) -> None:
    result = compile_file(str(cu), CompileOptions(arch="sm_90"))
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.diagnostics == [], [f"{d.line}: {d.message}" for d in result.diagnostics]
    source = cu.read_text()
    declared = {k.name for k in find_kernels(source)}
    assert {k.name for k in result.kernels} == declared
    for k in result.kernels:
        assert not k.spills, f"{k.name} spills"
    directives = parse_directives(source)
    assert directives.problems == []
    assert {d.kernel for d in directives.launches} == declared, "every kernel needs a launch line"


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_tune_defaults_are_the_source_defaults(cu: Path) -> None:
    """The first value of each tunable is the `#define` default, so the naive kernel compiled
    without -D flags and the tuner's first point are the same kernel."""
    source = cu.read_text()
    directives = parse_directives(source)
    for name, value in tune_defaults(directives).items():
        m = re.search(rf"#ifndef {name}\s*\n#define {name} (\d+)\s*\n#endif", source)
        assert m, f"tunable {name} needs `#ifndef {name} / #define {name} <default> / #endif`"
        assert int(m.group(1)) == value, f"{name}: #define says {m.group(1)}, the tune line {value}"


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_each_tunable_value_compiles(cu: Path) -> None:
    """Every value of every tunable, the others at their defaults, compiles without findings."""
    directives = parse_directives(cu.read_text())
    defaults = tune_defaults(directives)
    for name, values in directives.tune_space.items():
        for value in values:
            point = {**defaults, name: int(value)}
            defines = tuple(f"{k}={v}" for k, v in point.items())
            result = compile_file(str(cu), CompileOptions(arch="sm_90", defines=defines))
            assert result.ok and not result.diagnostics, (point, [d.message for d in result.diagnostics])


# --- specs and launch lines ---------------------------------------------------------------------


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_spec_loads_and_fits_its_kernel(cu: Path) -> None:
    spec = load_spec(cu)
    source = cu.read_text()
    directives = parse_directives(source)
    problems = check_spec(spec, find_kernels(source), bound_directives(directives, tune_defaults(directives)))
    assert problems == [], [f"{d.line}: {d.message}" for d in problems]
    for name, arg in spec.outputs().items():
        assert arg.atol is not None and arg.rtol is not None, f"{name}: give a tolerance"
    sizes = [math.prod(s.values()) for s in spec.sizes]
    assert min(sizes) <= 2, "test the smallest size there is (1, or 2 where a dimension must be even)"
    # Large enough to fill an H100 for timing: well past its 50 MB L2, or 100M+ operations (Monte
    # Carlo counts 3 float ops a point; its integer hash is most of the work).
    work = spec.work_for(spec.timing_cases()[0])
    assert work["bytes"] >= 64e6 or work["flops"] >= 3e8, f"timing case too small to fill a GPU: {work}"


H100_GRID_YZ = 65_535


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_launches_are_legal_over_the_tune_space(cu: Path) -> None:
    """Every point of the tune space, every case: block <= 1024 threads, grid within limits, and
    the scratch buffers hold one partial per block of pass 1."""
    spec = load_spec(cu)
    directives = parse_directives(cu.read_text())
    cases = spec.verification_sizes() + spec.timing_cases()
    for point in tune_points(directives):
        for sizes in cases:
            for kernel in spec.kernels:
                (d,) = directives.launches_of(kernel)
                grid, block, smem = launch_dims(d.grid, d.block, d.smem, {**sizes, **point})
                assert math.prod(block) <= 1024, (kernel, point, block)
                assert grid[0] < 2**31 and grid[1] <= H100_GRID_YZ and grid[2] <= H100_GRID_YZ, (
                    kernel,
                    point,
                    sizes,
                )
                assert smem <= 48 * 1024
            first = directives.launches_of(spec.kernels[0])[0]
            blocks = math.prod(launch_dims(first.grid, first.block, first.smem, {**sizes, **point})[0])
            for name, arg in spec.args.items():
                if isinstance(arg, Scratch):
                    assert math.prod(eval_shape(arg.shape, sizes)) >= blocks, (name, point, sizes)


# --- references against independent computations -------------------------------------------------


def _fsum_rows(a: np.ndarray) -> np.ndarray:
    return np.array([math.fsum(r) for r in a.reshape(a.shape[0], -1)])


def _lowbias32(v: int) -> int:
    v ^= v >> 16
    v = (v * 0x7FEB352D) & 0xFFFFFFFF
    v ^= v >> 15
    v = (v * 0x846CA68B) & 0xFFFFFFFF
    return v ^ (v >> 16)


def _monte_carlo(n: int, seed: int, bf16: bool) -> dict[str, np.ndarray]:
    key = _lowbias32(seed)
    total = 0.0
    for s in range(n):
        u = np.float32((_lowbias32(s ^ key) >> 8) / 2**24)
        if bf16:
            u = np.float32(ml_dtypes.bfloat16(u))
        total += float(np.float32(4.0) / (np.float32(1.0) + u * u))
    return {"result": np.array([total / n])}


def _stencil(src: np.ndarray, center: float, side: float) -> np.ndarray:
    out = np.zeros(src.shape)
    for idx in np.ndindex(src.shape):
        acc = 0.0
        for axis in range(src.ndim):
            for step in (-1, 1):
                j = list(idx)
                j[axis] += step
                if 0 <= j[axis] < src.shape[axis]:
                    acc += float(src[tuple(j)])
        out[idx] = center * float(src[idx]) + side * acc
    return out


def _rope(x, cos_table, sin_table, head_dim, **_) -> dict:
    half = head_dim // 2
    z = x[..., :half].astype(np.float64) + 1j * x[..., half:]  # the rotation as a complex product
    w = (cos_table + 1j * sin_table.astype(np.float64))[:, None, :]
    r = z * w
    return {"out": np.concatenate([r.real, r.imag], axis=-1)}


def _softmax_row(r: list[float]) -> list[float]:
    m = max(r)
    e = [math.exp(v - m) for v in r]
    total = math.fsum(e)
    return [v / total for v in e]


def _rmsnorm_row(r: list[float], weight: np.ndarray, eps: float) -> list[float]:
    rms = math.sqrt(math.fsum(v * v for v in r) / len(r) + eps)
    return [v / rms * float(g) for v, g in zip(r, weight, strict=True)]


def _spmv_dense(rows: int, entries) -> np.ndarray:
    dense = np.zeros((rows, rows))
    for r, c, v in entries:
        dense[r, c] += v
    return dense


# Each function recomputes a spec's outputs another way (loops, float64, math.fsum, complex numbers,
# dense matrices), from the same inputs.
INDEPENDENT: dict[str, Callable[..., dict]] = {
    "vector_add": lambda a, b, **_: {"c": [float(x) + float(y) for x, y in zip(a, b, strict=True)]},
    "reduce_sum": lambda x, **_: {"out": [math.fsum(x)]},
    "dot": lambda a, b, **_: {"out": [math.fsum(float(x) * float(y) for x, y in zip(a, b, strict=True))]},
    "transpose": lambda src, rows, cols, **_: {
        "dst": [[src[r][c] for r in range(rows)] for c in range(cols)]
    },
    "gemm": lambda A, B, **_: {"C": np.einsum("mk,kn->mn", A.astype(np.float64), B.astype(np.float64))},
    "scan": lambda x, **_: {"y": list(itertools.accumulate(float(v) for v in x))},
    "softmax": lambda x, **_: {"y": [_softmax_row(r) for r in x.tolist()]},
    "rmsnorm": lambda x, weight, eps, **_: {"y": [_rmsnorm_row(r, weight, eps) for r in x.tolist()]},
    "layernorm": lambda x, weight, bias, eps, **_: {
        "y": (x - x.mean(1, keepdims=True, dtype=np.float64))
        / np.sqrt(x.var(1, keepdims=True, dtype=np.float64) + eps)
        * weight
        + bias
    },
    "silu_and_mul": lambda x, d, **_: {
        "out": [[r[j] * r[d + j] / (1 + math.exp(-r[j])) for j in range(d)] for r in x.tolist()]
    },
    "rope": _rope,
    "spmv_csr": lambda row_ptr, col_idx, values, x, rows, **_: {
        "y": _spmv_dense(
            rows,
            [
                (r, col_idx[j], float(values[j]))
                for r in range(rows)
                for j in range(row_ptr[r], row_ptr[r + 1])
            ],
        )
        @ x.astype(np.float64)
    },
    "spmv_ell": lambda col_idx, values, x, rows, width, **_: {
        "y": _spmv_dense(
            rows,
            [
                (r, col_idx[k * rows + r], float(values[k * rows + r]))
                for r in range(rows)
                for k in range(width)
                if col_idx[k * rows + r] >= 0
            ],
        )
        @ x.astype(np.float64)
    },
    "stencil2d": lambda src, **_: {"dst": _stencil(src, 0.5, 0.125)},
    "stencil3d": lambda src, **_: {"dst": _stencil(src, 0.4, 0.1)},
    "monte_carlo": None,  # type: ignore[dict-item]  # needs the dtype: see below
}


def _small_cases(spec: Spec) -> list[dict[str, int]]:
    cases = spec.verification_sizes()
    return [
        s
        for s in cases
        if math.prod(s.values()) <= 50_000 and (spec.kernel != "monte_carlo" or s["n"] <= 5000)
    ]


@pytest.mark.parametrize("cu", CLEAN, ids=IDS)
def test_reference_matches_an_independent_computation(cu: Path) -> None:
    spec = load_spec(cu)
    fam = family(cu)
    cases = _small_cases(spec)
    assert len(cases) >= 3
    for sizes in cases:
        for run in range(3):  # each run draws from another distribution of the list
            inputs = make_inputs(spec, sizes, seed=1234, run=run)
            for name, arg in spec.args.items():
                if isinstance(arg, (In, InOut)):
                    assert inputs[name].shape == eval_shape(arg.shape, sizes)
            got = run_reference(spec, sizes, inputs)
            available = {**sizes}
            for name, arg in spec.args.items():
                if isinstance(arg, Scalar):
                    available[name] = spec.scalar_value(name, sizes).item()
                elif arg.is_input:
                    v = inputs[name]
                    available[name] = v.astype(np.float32) if v.dtype == ml_dtypes.bfloat16 else v
            if fam == "monte_carlo":
                expected = _monte_carlo(sizes["n"], sizes["seed"], bf16="bf16" in cu.name)
            else:
                expected = INDEPENDENT[fam](**available)
            for name, arg in spec.outputs().items():
                shape = eval_shape(arg.shape, sizes)
                assert got[name].shape == shape
                assert got[name].dtype == (
                    np.float32 if arg.dtype in ("bfloat16", "float16") else np.dtype(arg.dtype)
                )
                want = np.asarray(expected[name], dtype=np.float64).reshape(shape)
                assert np.all(np.isfinite(got[name]))
                # The reference is float32 (or float64) math, the independent one float64:
                # they agree far inside the spec's own tolerance.
                scale = max(1.0, float(np.abs(want).max(initial=0.0)))
                np.testing.assert_allclose(
                    got[name], want, rtol=2e-5, atol=2e-6 * scale, err_msg=f"{sizes} run {run}"
                )
                assert arg.dtype in FLOAT_DTYPES


# --- samples/broken -----------------------------------------------------------------------------


def _findings(name: str, compiler: str = "auto") -> list[tuple[str, int, Severity, str | None, str]]:
    result = compile_file(str(BROKEN / name), CompileOptions(arch="sm_90", compiler=compiler))
    return [(Path(d.path).name, d.line, d.severity, d.code, d.message) for d in result.diagnostics]


def test_broken_error() -> None:
    found = _findings("error.cu")
    assert [(f[0], f[1], f[2]) for f in found] == [("error.cu", 11, Severity.ERROR)]
    assert 'identifier "idx" is undefined' in found[0][4]


def test_broken_warning() -> None:
    found = _findings("warning.cu")
    assert [(f[0], f[1], f[2], f[3]) for f in found] == [("warning.cu", 10, Severity.WARNING, "177-D")]
    assert '"unused"' in found[0][4]
    assert compile_file(str(BROKEN / "warning.cu"), CompileOptions(arch="sm_90")).ok


def test_broken_header_error_shows_in_header_and_at_include_line() -> None:
    found = _findings("header_error.cu")
    in_header = [f for f in found if f[0] == "broken_header.cuh"]
    at_include = [f for f in found if f[0] == "header_error.cu"]
    assert [(f[1], f[2]) for f in in_header] == [(6, Severity.ERROR)]
    assert 'identifier "flaot" is undefined' in in_header[0][4]
    assert [(f[1], f[2]) for f in at_include] == [(4, Severity.ERROR)], "the #include line is line 4"


def test_host_code_compiles_with_nvcc() -> None:
    assert _findings("host_code.cu") == []


def test_broken_host_code_gets_one_clear_finding_from_nvrtc() -> None:
    found = _findings("host_code.cu", compiler="nvrtc")
    assert len(found) == 1, found
    path, _line, severity, _code, message = found[0]
    assert (path, severity) == ("host_code.cu", Severity.ERROR)
    assert "host code" in message and "__CUDACC_RTC__" in message and "default-device" in message
