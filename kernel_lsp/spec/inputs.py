"""Making a case's inputs (distributions) and running the reference on them."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .dtypes import DTYPES, FLOAT_DTYPES
from .expressions import SpecError, call_with_names, eval_expr, eval_shape
from .model import Distribution, In, InOut, Scalar, Spec

# The seeds of verification's inputs (the GPU worker's and the CPU dry run's) and of timing's.
VERIFY_SEED = 0x5EED
TIMING_SEED = 0x7135
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
    if isinstance(arg.dist, str) or callable(arg.dist):
        return [arg.dist]
    return list(arg.dist)


def check_distribution(dist: Distribution) -> str | None:
    if callable(dist):
        return None
    m = _DIST.match(str(dist))
    if not m:
        return (
            f"unknown distribution `{dist}`: use normal, uniform(a, b), randint(a, b), positive, "
            "zeros, ones or a callable(rng, shape, ...)"
        )
    name, params = m.group(1), m.group(2)
    if name in ("uniform", "randint"):
        try:
            lo, hi = eval_expr(f"({params})", {})
            float(lo), float(hi)
        except Exception:
            return f"`{dist}`: {name} needs two numbers, e.g. {name}(-1, 1)"
    return None


def _call_distribution(
    fn: Callable[..., Any],
    rng: np.random.Generator,
    shape: tuple[int, ...],
    sizes: Mapping[str, Any],
    inputs: Mapping[str, np.ndarray],
) -> Any:
    """A distribution callable gets what it names among `rng`, `shape`, `sizes` (a dict), `inputs`
    (the arrays drawn before it, in args order), a size or an earlier input by its own name. One
    whose parameters name none of those (`lambda g, s: ...`) is called as `fn(rng, shape)`."""
    available: dict[str, Any] = {
        **{k: host_view(v) for k, v in inputs.items()},
        **sizes,
        "rng": rng,
        "shape": shape,
        "sizes": dict(sizes),
        "inputs": {k: host_view(v) for k, v in inputs.items()},
    }
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(rng, shape)
    named = [
        n
        for n, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
    ]
    if any(p.kind is p.VAR_KEYWORD for p in params.values()) or any(n in available for n in named):
        return call_with_names(fn, available)  # a name it lacks is a clear SpecError there
    return fn(rng, shape)


def sample(
    dist: Distribution,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: str,
    sizes: Mapping[str, Any] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Draw an array of `dtype` (bf16 through ml_dtypes) from a distribution. A callable may name
    the case's `sizes` and the `inputs` drawn so far (see `_call_distribution`)."""
    dt = DTYPES[dtype]
    if callable(dist):
        values = np.asarray(_call_distribution(dist, rng, shape, sizes or {}, inputs or {}))
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
        try:
            arrays[name] = sample(dist, rng, eval_shape(arg.shape, sizes), arg.dtype, sizes, arrays)
        except SpecError as e:  # which argument, at its line
            raise SpecError(f"`{name}`: {e}", e.line or arg.line) from None
    return arrays


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
    for alias, target in spec.aliases().items():
        if target in available:
            available.setdefault(alias, available[target])
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
    for name, buf in outputs.items():
        if name not in result:
            raise SpecError(f"reference returned no `{name}` (it returned {', '.join(result)})")
        shape = eval_shape(buf.shape, sizes)
        value = np.asarray(result[name])
        if value.dtype.kind not in "biuf":  # complex, object (a None inside), strings
            raise SpecError(
                f"reference output `{name}` is an array of {value.dtype} ({_first_of(value)}); "
                f"the buffer holds {buf.dtype}"
            )
        if value.size != math.prod(shape):
            raise SpecError(
                f"reference output `{name}` has {value.size} elements, the buffer "
                f"{math.prod(shape)} (shape {shape})"
            )
        if buf.dtype not in FLOAT_DTYPES and value.dtype.kind == "f":
            bad = ~np.isfinite(value) | (value != np.round(value))
            if np.any(bad):
                i = int(np.flatnonzero(bad.reshape(-1))[0])
                raise SpecError(
                    f"reference output `{name}` is {buf.dtype}, but the reference gives "
                    f"{value.reshape(-1)[i]} at index {i}: round it (np.rint) or give the buffer a float dtype"
                )
        if _dims(value.shape) != _dims(shape) and len(_dims(value.shape)) > 1 and len(_dims(shape)) > 1:
            # Same count, other dimensions: a transposed or mis-ordered result. A flat result is
            # fine (it is reshaped to the buffer's shape).
            raise SpecError(f"reference output `{name}` has shape {value.shape}, the buffer {shape}")
        host_type = np.float32 if buf.dtype in ("float16", "bfloat16") else DTYPES[buf.dtype]
        got[name] = value.reshape(shape).astype(host_type)
    return got


def _dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _first_of(value: np.ndarray) -> str:
    flat = value.reshape(-1)
    return f"first element {flat[0]}" if flat.size else "empty"
