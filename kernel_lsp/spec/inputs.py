"""Making a case's inputs (distributions) and running the reference on them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .dtypes import DTYPES, FLOAT_DTYPES
from .expressions import SpecError, call_with_names, eval_expr, eval_shape
from .model import Distribution, In, InOut, Scalar, Spec

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
