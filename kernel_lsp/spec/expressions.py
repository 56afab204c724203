"""Expressions over a spec's sizes: shapes, scalar values, launch dimensions. They come from the
user's spec file and from launch comments and `#define` lines in the `.cu`, which a workspace
ships: they are evaluated by `kernel_lsp.safe_expr` (arithmetic, sizes, macros and the helpers
cdiv, min, max, round_up, ...), never by Python's `eval`."""

from __future__ import annotations

import inspect
import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..constants import macro_values
from ..safe_expr import ExprError, UnknownName, safe_eval
from ..safe_expr import cdiv as cdiv  # the spec API's helper


class SpecError(ValueError):
    """A spec that cannot be used as written; `line` is where in the spec file (0: unknown)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def user_line(exc: BaseException, path: str, default: int = 1) -> int:
    """The line of the spec file `path` that the traceback of `exc` points to (its deepest frame
    there): where the user's code raised. `default` when no frame is in that file."""
    line = 0
    target = os.path.abspath(path) if path else ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if target and os.path.abspath(frame.filename) == target:
            line = frame.lineno or line
    return line or default


def eval_expr(expr: object, sizes: Mapping[str, Any]) -> Any:
    """Evaluate a size expression (`"cdiv(n, 256)"`, `"(m, n)"`, `256`) over the sizes."""
    if isinstance(expr, (int, float, np.integer, np.floating)):
        return expr
    try:
        return safe_eval(str(expr), sizes)
    except UnknownName as e:
        known = ", ".join(sorted(sizes)) or "none"
        raise SpecError(f"`{expr}`: {e} (sizes known here: {known})") from None
    except ExprError as e:
        raise SpecError(f"`{expr}` cannot be evaluated: {e}") from None


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


def source_constants(source: str, defines: Sequence[str] = ()) -> dict[str, int]:
    """Integer constants a launch line may use (`block=BLOCK`): `-D` defines first (they win over
    an `#ifndef` default), then the source's `#define`s and file-scope constants (kernel_lsp.constants)."""
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
        x, y, z = [int(d) for d in t] + [1] * (3 - len(t))
        if min(x, y, z) < 1:
            raise SpecError(f"{what}={expr} gives {v!r}; each dimension must be >= 1")
        return x, y, z

    s = eval_expr(smem or "0", sizes)
    if not isinstance(s, (int, np.integer)) or s < 0:
        raise SpecError(f"smem={smem} gives {s!r}; expected an int >= 0")
    return dims(grid, "grid"), dims(block, "block"), int(s)
