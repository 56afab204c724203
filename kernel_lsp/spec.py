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
The format is documented in docs/specs.md. This module is pure Python + numpy + ml_dtypes (the
GPU worker imports it too), and never touches CUDA.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from kernel_lsp.model import Diagnostic, Severity
from kernel_lsp.source import Directives, KernelSignature, find_kernel

SPEC_SOURCE = "kernel-lsp spec"
_THIS_FILE = os.path.abspath(__file__)

# --- dtypes -------------------------------------------------------------------------------------

DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
}
FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64"}

# C element types -> the spec dtypes they hold. Vector types (float4, half2, ...) hold several
# elements of the scalar type; a `float4*` is declared in the spec as float32 (element count).
C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "__nv_bfloat162": "bfloat16",
    "nv_bfloat162": "bfloat16",
    "__half2": "float16",
    "half2": "float16",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "unsigned long long": "uint64",
    "unsigned long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
}
for _v, _s in (("float", "float32"), ("double", "float64"), ("int", "int32"), ("uint", "uint32")):
    for _k in (2, 3, 4):
        C_TYPES[f"{_v}{_k}"] = _s
C_TYPES["char4"] = "int8"
C_TYPES["uchar4"] = "uint8"


def c_type_dtype(c_type: str) -> str | None:
    """The spec dtype a C element/scalar type holds ("const float* __restrict__" -> "float32")."""
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b", " ", c_type)
    base = " ".join(base.replace("*", " ").replace("&", " ").split())
    return C_TYPES.get(base)


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(atol, rtol) used when an output does not give its own."""
    return {
        "float64": (1e-10, 1e-9),
        "float32": (1e-5, 1e-4),
        "float16": (1e-3, 1e-2),
        "bfloat16": (1e-2, 2e-2),
    }.get(dtype, (0.0, 0.0))


# --- expressions over sizes ---------------------------------------------------------------------


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


_EXPR_GLOBALS: dict[str, Any] = {
    "__builtins__": {},
    "cdiv": cdiv,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "round_up": lambda a, b: cdiv(a, b) * int(b),
    "log2": lambda x: int(math.log2(x)),
    "next_pow2": lambda x: 1 << max(0, int(x) - 1).bit_length(),
}


class SpecError(ValueError):
    """A spec that cannot be used as written; `line` is where in the spec file (0: unknown)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def eval_expr(expr: str | int | float, sizes: Mapping[str, Any]) -> Any:
    """Evaluate a size expression (`"cdiv(n, 256)"`, `"(m, n)"`, `256`) over the sizes."""
    if isinstance(expr, (int, float, np.integer, np.floating)):
        return expr
    try:
        return eval(str(expr), dict(_EXPR_GLOBALS), dict(sizes))  # the user's own spec
    except NameError as e:
        known = ", ".join(sorted(sizes)) or "none"
        raise SpecError(f"`{expr}`: {e} (sizes known here: {known})") from None
    except Exception as e:
        raise SpecError(f"`{expr}` cannot be evaluated: {type(e).__name__}: {e}") from None


def eval_shape(shape: str | int | Sequence[str | int], sizes: Mapping[str, Any]) -> tuple[int, ...]:
    """A shape as a tuple of ints: "n" -> (n,), "(m, n)" or ("m", "n") -> (m, n)."""
    value = (
        tuple(eval_expr(s, sizes) for s in shape)
        if isinstance(shape, (tuple, list))
        else eval_expr(shape, sizes)
    )
    dims = value if isinstance(value, tuple) else (value,)
    out = []
    for d in dims:
        if isinstance(d, float) and d.is_integer():
            d = int(d)
        if not isinstance(d, (int, np.integer)) or d < 0:
            raise SpecError(f"shape `{shape}` gives {value!r}; each dimension must be an int >= 0")
        out.append(int(d))
    return tuple(out)


# --- argument declarations ----------------------------------------------------------------------


def _caller_line() -> int:
    """The line of the first frame outside this module: where the user wrote In(...) / Spec(...)."""
    frame = sys._getframe(1)
    while frame is not None and (
        os.path.abspath(frame.f_code.co_filename) == _THIS_FILE
        # the __init__ that dataclasses generate has no file of its own
        or (frame.f_code.co_name == "__init__" and frame.f_code.co_filename.startswith("<"))
    ):
        frame = frame.f_back
    return frame.f_lineno if frame is not None else 0


Distribution = str | Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
Compare = Callable[[np.ndarray, np.ndarray], "str | None"]


@dataclass(frozen=True)
class _Buffer:
    dtype: str
    shape: str | int | tuple[str | int, ...] = "n"
    line: int = field(default=0, compare=False)

    kind = "buffer"

    def __post_init__(self) -> None:
        if not self.line:
            object.__setattr__(self, "line", _caller_line())

    @property
    def is_input(self) -> bool:
        return self.kind in ("in", "inout")

    @property
    def is_output(self) -> bool:
        return self.kind in ("out", "inout")


@dataclass(frozen=True)
class In(_Buffer):
    """A device buffer the kernel reads. `dist`: one distribution or a list; verification cycles
    through the list over its runs (default: normal, then uniform(-1, 1) for floats)."""

    dist: Distribution | Sequence[Distribution] | None = None
    kind = "in"


@dataclass(frozen=True)
class Out(_Buffer):
    """A device buffer the kernel writes; compared with the reference's output of the same name."""

    atol: float | None = None
    rtol: float | None = None
    compare: Compare | None = None  # compare(out, ref) -> None if fine, else a message
    kind = "out"


@dataclass(frozen=True)
class InOut(_Buffer):
    """Read, then written in place; the reference receives the input and returns the new value."""

    dist: Distribution | Sequence[Distribution] | None = None
    atol: float | None = None
    rtol: float | None = None
    compare: Compare | None = None
    kind = "inout"


@dataclass(frozen=True)
class Scratch(_Buffer):
    """A device buffer for the kernel's own use (workspace, counters): poisoned, never compared.
    `zero=True` zero-fills it before each run (for atomic counters)."""

    zero: bool = False
    kind = "scratch"


@dataclass(frozen=True)
class Scalar:
    """A by-value argument. `value`: an expression over the sizes or a number; by default the size
    of the same name as the parameter."""

    dtype: str
    value: str | int | float | None = None
    line: int = field(default=0, compare=False)

    kind = "scalar"
    is_input = False
    is_output = False

    def __post_init__(self) -> None:
        if not self.line:
            object.__setattr__(self, "line", _caller_line())


Arg = In | Out | InOut | Scratch | Scalar


@dataclass
class Spec:
    kernel: str
    sizes: list[dict[str, int]]
    args: dict[str, Arg]
    reference: Callable[..., Any] | None = None
    pipeline: list[str] | None = None
    timing_sizes: list[dict[str, int]] | None = None
    work: Callable[..., Mapping[str, float]] | None = None
    # True: add small awkward sizes (all sizes 1, all 97) to the verification cases; a list: those.
    edge_sizes: bool | list[dict[str, int]] = True
    seed: int = 0
    name: str | None = None  # shown in reports; default: the kernel
    line: int = field(default=0, compare=False)
    path: str = field(default="", compare=False)  # the spec file (set by load_specs)

    def __post_init__(self) -> None:
        if not self.line:
            self.line = _caller_line()

    @property
    def title(self) -> str:
        return self.name or self.kernel

    @property
    def kernels(self) -> list[str]:
        """The kernels launched, in order (the pipeline, or just the kernel)."""
        return list(self.pipeline) if self.pipeline else [self.kernel]

    @property
    def size_names(self) -> list[str]:
        names: list[str] = []
        for s in self.sizes:
            names += [k for k in s if k not in names]
        return names

    def verification_sizes(self) -> list[dict[str, int]]:
        """The spec's sizes, plus edge sizes, without repeats, smallest first."""
        sizes = [dict(s) for s in self.sizes]
        if self.edge_sizes is True and self.sizes:
            names = self.size_names
            edges = [dict.fromkeys(names, 1), dict.fromkeys(names, 97)]
        elif isinstance(self.edge_sizes, list):
            edges = [dict(s) for s in self.edge_sizes]
        else:
            edges = []
        for e in edges:
            if e not in sizes:
                sizes.append(e)
        return sizes

    def timing_cases(self) -> list[dict[str, int]]:
        if self.timing_sizes:
            return [dict(s) for s in self.timing_sizes]
        if not self.sizes:
            return []
        return [dict(max(self.sizes, key=lambda s: math.prod(max(1, int(v)) for v in s.values())))]

    def buffers(self) -> dict[str, _Buffer]:
        return {k: a for k, a in self.args.items() if not isinstance(a, Scalar)}

    def outputs(self) -> dict[str, _Buffer]:
        return {k: a for k, a in self.args.items() if a.is_output}

    def scalar_value(self, name: str, sizes: Mapping[str, Any]) -> Any:
        arg = self.args[name]
        assert isinstance(arg, Scalar)
        expr = name if arg.value is None else arg.value
        value = eval_expr(expr, sizes)
        return DTYPES[arg.dtype].type(value)

    def work_for(self, sizes: Mapping[str, Any]) -> dict[str, Any]:
        """`bytes` and `flops` as floats; `dtype` (which FLOP peak bounds the time) as named."""
        if self.work is None:
            return {}
        return {
            k: v if k == "dtype" else float(v) for k, v in call_with_names(self.work, dict(sizes)).items()
        }


def case_label(sizes: Mapping[str, Any]) -> str:
    """ "n=1000003" or "m=128, n=97": how a case is named in messages."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


# --- making inputs and the reference ------------------------------------------------------------

DEFAULT_FLOAT_DISTS: tuple[str, ...] = ("normal", "uniform(-1, 1)")
DEFAULT_SIGNED_DISTS: tuple[str, ...] = ("randint(-100, 100)", "randint(-3, 3)")
DEFAULT_UNSIGNED_DISTS: tuple[str, ...] = ("randint(0, 100)", "randint(0, 3)")
_DIST = re.compile(r"^\s*(normal|uniform|randint|positive|zeros|ones)\s*(?:\((.*)\))?\s*$")


def distributions(arg: In | InOut) -> list[Distribution]:
    if arg.dist is None:
        if arg.dtype in FLOAT_DTYPES:
            return list(DEFAULT_FLOAT_DISTS)
        if arg.dtype.startswith("u"):
            return list(DEFAULT_UNSIGNED_DISTS)
        return list(DEFAULT_SIGNED_DISTS)
    if isinstance(arg.dist, (list, tuple)):
        return list(arg.dist)
    return [arg.dist]


def check_distribution(dist: Distribution) -> str | None:
    if callable(dist):
        return None
    m = _DIST.match(str(dist))
    if not m:
        return (
            f"unknown distribution `{dist}`: use normal, uniform(a, b), randint(a, b), positive, "
            "zeros, ones or a callable(rng, shape)"
        )
    name, params = m.group(1), m.group(2)
    if name in ("uniform", "randint"):
        try:
            lo, hi = eval_expr(f"({params})", {})
            float(lo), float(hi)
        except Exception:
            return f"`{dist}`: {name} needs two numbers, e.g. {name}(-1, 1)"
    return None


def sample(dist: Distribution, rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Draw an array of `dtype` (bf16 through ml_dtypes) from a distribution."""
    dt = DTYPES[dtype]
    if callable(dist):
        values = np.asarray(dist(rng, shape))
        if values.shape != shape:
            raise SpecError(f"distribution callable returned shape {values.shape}, expected {shape}")
        return values.astype(dt)
    problem = check_distribution(dist)
    if problem:
        raise SpecError(problem)
    m = _DIST.match(str(dist))
    assert m
    name, params = m.group(1), m.group(2)
    if name == "zeros":
        return np.zeros(shape, dt)
    if name == "ones":
        return np.ones(shape, dt)
    if name == "normal":
        values = rng.standard_normal(shape, dtype=np.float32)
    elif name == "positive":
        values = rng.uniform(0.1, 2.0, shape).astype(np.float32)
    else:
        lo, hi = eval_expr(f"({params})", {})
        if name == "uniform":
            values = rng.uniform(lo, hi, shape)
        else:  # randint, inclusive of both ends
            values = rng.integers(int(lo), int(hi), shape, endpoint=True)
    if dtype not in FLOAT_DTYPES:
        values = np.rint(values)
        info = np.iinfo(dt)
        values = np.clip(values, info.min, info.max)
    return values.astype(dt)


def host_view(array: np.ndarray) -> np.ndarray:
    """What a reference or compare function sees: fp16/bf16 widened to float32."""
    if array.dtype in (DTYPES["float16"], DTYPES["bfloat16"]):
        return array.astype(np.float32)
    return array


def make_inputs(spec: Spec, sizes: Mapping[str, Any], seed: int, run: int = 0) -> dict[str, np.ndarray]:
    """Fresh host arrays for every In/InOut buffer: `run` picks the distribution (cycling through
    the arg's list), `seed` the stream. Outputs and scratch are not made here (they are poisoned
    on the device)."""
    arrays: dict[str, np.ndarray] = {}
    for i, (name, arg) in enumerate(spec.args.items()):
        if not arg.is_input:
            continue
        assert isinstance(arg, (In, InOut))
        dists = distributions(arg)
        dist = dists[run % len(dists)]
        rng = np.random.default_rng([seed, run, i])
        arrays[name] = sample(dist, rng, eval_shape(arg.shape, sizes), arg.dtype)
    return arrays


def call_with_names(fn: Callable[..., Any], available: Mapping[str, Any]) -> Any:
    """Call `fn` with the keyword arguments it names (all of them if it takes **kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(**available)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn(**available)
    missing = [
        n
        for n, p in params.items()
        if n not in available
        and p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL,)
    ]
    if missing:
        raise SpecError(
            f"{getattr(fn, '__name__', 'function')} takes {', '.join(missing)}, which is neither "
            f"an input, a scalar nor a size (available: {', '.join(available)})"
        )
    return fn(**{n: available[n] for n in params if n in available})


def run_reference(
    spec: Spec, sizes: Mapping[str, Any], inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The reference's outputs, by name, each shaped and typed like the output buffer (as float32
    for fp16/bf16 outputs, float64 kept)."""
    if spec.reference is None:
        raise SpecError("the spec has no reference", spec.line)
    available: dict[str, Any] = dict(sizes)
    for name, arg in spec.args.items():
        if isinstance(arg, Scalar):
            available[name] = spec.scalar_value(name, sizes).item()
        elif arg.is_input:
            available[name] = host_view(inputs[name]).copy()
    result = call_with_names(spec.reference, available)
    outputs = spec.outputs()
    if not isinstance(result, Mapping):
        if len(outputs) == 1:
            result = {next(iter(outputs)): result}
        else:
            raise SpecError(
                f"reference must return a dict of outputs by name ({', '.join(outputs)}), "
                f"got {type(result).__name__}"
            )
    got: dict[str, np.ndarray] = {}
    for name, arg in outputs.items():
        if name not in result:
            raise SpecError(f"reference returned no `{name}` (it returned {', '.join(result)})")
        shape = eval_shape(arg.shape, sizes)
        value = np.asarray(result[name])
        if value.size != math.prod(shape):
            raise SpecError(
                f"reference output `{name}` has {value.size} elements, the buffer "
                f"{math.prod(shape)} (shape {shape})"
            )
        target = np.float32 if arg.dtype in ("float16", "bfloat16") else DTYPES[arg.dtype]
        got[name] = value.reshape(shape).astype(target)
    return got


# --- loading spec files -------------------------------------------------------------------------


def spec_path_for(cu_path: str) -> str:
    """`dir/vadd.cu` -> `dir/vadd.spec.py` (the sidecar, whether it exists or not)."""
    stem, _ = os.path.splitext(cu_path)
    return stem + ".spec.py"


@dataclass
class SpecLoad:
    path: str
    specs: list[Spec] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)

    def for_kernel(self, kernel: str) -> Spec | None:
        return next((s for s in self.specs if s.kernel == kernel), None)


def _diag(path: str, line: int, message: str, code: str, severity: Severity = Severity.ERROR) -> Diagnostic:
    return Diagnostic(path, max(1, line), 1, severity, message, code=code, source=SPEC_SOURCE)


def load_specs(path: str, source: str | None = None) -> SpecLoad:
    """Run a spec file (the user's own code) and collect its SPEC / SPECS. Never raises: an
    exception becomes a diagnostic at the line of the spec file the traceback points to.
    `source`: the file's text when the editor holds unsaved changes."""
    result = SpecLoad(path)
    try:
        if source is None:
            with open(path, encoding="utf-8") as f:
                source = f.read()
    except OSError as e:
        result.diagnostics.append(_diag(path, 1, f"cannot read spec: {e}", "spec-read"))
        return result
    namespace: dict[str, Any] = {"__file__": path, "__name__": "kernel_lsp_spec"}
    spec_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, spec_dir)  # a spec may import helpers that sit beside it
    try:
        code = compile(source, path, "exec")
        exec(code, namespace)  # the user's own spec file
    except SyntaxError as e:
        result.diagnostics.append(_diag(path, e.lineno or 1, f"syntax error in spec: {e.msg}", "spec-syntax"))
        return result
    except BaseException as e:  # SystemExit in a spec must not stop the server
        line = _traceback_line(e, path)
        if isinstance(e, SpecError) and e.line:
            line = e.line
        result.diagnostics.append(_diag(path, line, f"spec raised {type(e).__name__}: {e}", "spec-exception"))
        return result
    finally:
        if sys.path and sys.path[0] == spec_dir:
            sys.path.pop(0)

    found = namespace.get("SPECS", namespace.get("SPEC"))
    if found is None:
        result.diagnostics.append(
            _diag(
                path,
                1,
                "spec file defines neither SPEC = Spec(...) nor SPECS = [...]",
                "spec-missing",
            )
        )
        return result
    items = found if isinstance(found, (list, tuple)) else [found]
    for item in items:
        if not isinstance(item, Spec):
            result.diagnostics.append(
                _diag(
                    path,
                    1,
                    f"SPEC(S) must hold Spec objects, found {type(item).__name__}",
                    "spec-type",
                )
            )
            continue
        item.path = path
        result.specs.append(item)
        result.diagnostics += _check_spec_alone(item)
    return result


def _traceback_line(exc: BaseException, path: str) -> int:
    line = 0
    target = os.path.abspath(path)
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == target:
            line = frame.lineno or line  # the deepest frame in the spec file
    return line or 1


def _check_spec_alone(spec: Spec) -> list[Diagnostic]:
    """What can be checked without the kernel: sizes, dtypes, shapes, distributions, callables."""
    p = spec.path
    out: list[Diagnostic] = []
    if not isinstance(spec.sizes, list) or not spec.sizes or not all(isinstance(s, dict) for s in spec.sizes):
        out.append(
            _diag(
                p,
                spec.line,
                'sizes must be a non-empty list of dicts, e.g. [{"n": 1000}]',
                "spec-sizes",
            )
        )
        return out
    for s in spec.sizes:
        for k, v in s.items():
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                out.append(_diag(p, spec.line, f"size {k}={v!r} must be an int >= 0", "spec-sizes"))
    if spec.reference is None:
        out.append(
            _diag(
                p,
                spec.line,
                f"{spec.title}: no reference, so results cannot be checked",
                "spec-reference",
                Severity.WARNING,
            )
        )
    elif not callable(spec.reference):
        out.append(_diag(p, spec.line, "reference must be a function", "spec-reference"))
    if not isinstance(spec.args, dict):
        out.append(_diag(p, spec.line, "args must be a dict from parameter name to In/Out/...", "spec-args"))
        return out
    if not spec.outputs():
        out.append(
            _diag(
                p,
                spec.line,
                "no Out or InOut argument: nothing to check",
                "spec-args",
                Severity.WARNING,
            )
        )
    all_sizes = spec.verification_sizes() + spec.timing_cases()
    for name, arg in spec.args.items():
        if not isinstance(arg, (In, Out, InOut, Scratch, Scalar)):
            out.append(
                _diag(p, spec.line, f"`{name}` must be In, Out, InOut, Scratch or Scalar", "spec-args")
            )
            continue
        line = arg.line or spec.line
        if arg.dtype not in DTYPES:
            out.append(
                _diag(
                    p,
                    line,
                    f"`{name}`: unknown dtype `{arg.dtype}` (use {', '.join(DTYPES)})",
                    "spec-dtype",
                )
            )
            continue
        try:
            for sizes in all_sizes:
                if isinstance(arg, Scalar):
                    spec.scalar_value(name, sizes)
                else:
                    eval_shape(arg.shape, sizes)
        except SpecError as e:
            what = "value" if isinstance(arg, Scalar) else "shape"
            out.append(_diag(p, line, f"`{name}` {what}: {e} (case {case_label(sizes)})", "spec-shape"))
        if isinstance(arg, (In, InOut)):
            for dist in distributions(arg):
                problem = check_distribution(dist)
                if problem:
                    out.append(_diag(p, line, f"`{name}`: {problem}", "spec-dist"))
    return out


# --- checking a spec against its kernel ---------------------------------------------------------


def check_spec(
    spec: Spec,
    signature: KernelSignature | Sequence[KernelSignature],
    directives: Directives,
    constants: Mapping[str, int] | None = None,
) -> list[Diagnostic]:
    """Diagnostics (in the spec file) where the spec does not fit the kernel(s) it describes:
    missing or extra arguments, pointer vs scalar, dtype vs C type, a missing launch line, launch
    expressions that do not evaluate over the sizes."""
    p = spec.path
    sigs = [signature] if isinstance(signature, KernelSignature) else list(signature)
    out: list[Diagnostic] = []
    if not isinstance(spec.args, dict):
        return out
    used: set[str] = set()
    for kname in spec.kernels:
        sig = find_kernel(sigs, kname)
        if sig is None:
            out.append(_diag(p, spec.line, f"no kernel `{kname}` in the .cu file", "spec-kernel"))
            continue
        for param in sig.params:
            used.add(param.name)
            arg = spec.args.get(param.name)
            if arg is None:
                out.append(
                    _diag(
                        p,
                        spec.line,
                        f"`{kname}` parameter `{param.type} {param.name}` has no entry in args",
                        "spec-args",
                    )
                )
                continue
            line = getattr(arg, "line", 0) or spec.line
            if param.is_pointer and isinstance(arg, Scalar):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is a pointer ({param.type}) but declared Scalar",
                        "spec-args",
                    )
                )
                continue
            if not param.is_pointer and not isinstance(arg, Scalar):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is passed by value ({param.type}); declare it Scalar(...)",
                        "spec-args",
                    )
                )
                continue
            if getattr(arg, "dtype", None) not in DTYPES:
                continue
            want = c_type_dtype(param.type)
            if want is None and "<" in kname:
                pass  # a template instance's `T`: its type is the instance's argument
            elif want is None:
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}`: cannot tell the element type of `{param.type}`; "
                        f"make sure {arg.dtype} matches it",
                        "spec-dtype",
                        Severity.WARNING,
                    )
                )
            elif want != arg.dtype:
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is `{param.type}` ({want}) but the spec says {arg.dtype}",
                        "spec-dtype",
                    )
                )
            if param.is_pointer and param.is_const and isinstance(arg, (Out, InOut)):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is a const pointer but declared {type(arg).__name__}",
                        "spec-args",
                        Severity.WARNING,
                    )
                )
    for name, arg in spec.args.items():
        if name not in used and sigs and all(find_kernel(sigs, k) for k in spec.kernels):
            out.append(
                _diag(
                    p,
                    getattr(arg, "line", 0) or spec.line,
                    f"`{name}` is not a parameter of {', '.join(spec.kernels)}",
                    "spec-args",
                )
            )
    # Launch lines: one per pipeline step, and their expressions must evaluate for every case.
    counts: dict[str, int] = {}
    all_sizes = spec.verification_sizes() + spec.timing_cases()
    for kname in spec.kernels:
        launches = directives.launches_of(kname)
        i = counts.get(kname, 0)
        counts[kname] = i + 1
        if i >= len(launches):
            host = directives.host_notes.get(kname)
            out.append(
                _diag(
                    p,
                    spec.line,
                    f"no `// kernel-lsp: launch {kname} grid=... block=...` line for `{kname}` "
                    f"in the .cu (needed {i + 1}, found {len(launches)})"
                    + (f", and its launch in host code cannot be used: {host}" if host else ""),
                    "spec-launch",
                )
            )
            continue
        d = launches[i]
        for sizes in all_sizes:
            try:
                launch_dims(d.grid, d.block, d.smem, {**(constants or {}), **sizes})
            except SpecError as e:
                out.append(
                    _diag(
                        p,
                        spec.line,
                        f"{d.described}: {e} (case {case_label(sizes)})",
                        "spec-launch",
                    )
                )
                break
    return out


def source_constants(source: str, defines: Sequence[str] = ()) -> dict[str, int]:
    """Integer constants a launch line may use (`block=BLOCK`): `-D` defines first (they win over
    an `#ifndef` default), then the source's `#define`s and file-scope constants (kernel_lsp.constants)."""
    from .constants import macro_values

    return macro_values(source, defines)


def launch_dims(
    grid: str, block: str, smem: str, sizes: Mapping[str, Any]
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """Evaluate a launch line's expressions: ((gx, gy, gz), (bx, by, bz), smem bytes)."""

    def dims(expr: str, what: str) -> tuple[int, int, int]:
        v = eval_expr(expr, sizes)
        t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) for x in t):
            raise SpecError(f"{what}={expr} gives {v!r}; expected 1 to 3 ints")
        t = tuple(int(x) for x in t) + (1,) * (3 - len(t))
        if min(t) < 1:
            raise SpecError(f"{what}={expr} gives {v!r}; each dimension must be >= 1")
        return t  # type: ignore[return-value]

    s = eval_expr(smem or "0", sizes)
    if not isinstance(s, (int, np.integer)) or s < 0:
        raise SpecError(f"smem={smem} gives {s!r}; expected an int >= 0")
    return dims(grid, "grid"), dims(block, "block"), int(s)


# --- skeletons ----------------------------------------------------------------------------------


def spec_skeleton(
    signature: KernelSignature, directives: Directives | None = None, source: str | None = None
) -> str:
    """The text of a spec file for a kernel that has none (kernel_lsp.skeleton: shapes from the
    kernel's indexing in `source`, small sizes)."""
    from .skeleton import spec_skeleton as build

    return build(signature, directives, source)
