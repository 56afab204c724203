"""The public spec API: Spec and its argument declarations (In, Out, InOut, Scratch, Scalar,
Alias)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from .dtypes import DTYPES
from .expressions import call_with_names, eval_expr

_THIS_FILE = os.path.abspath(__file__)


def _caller_line() -> int:
    """The line of the first frame outside this module: where the user wrote In(...) / Spec(...)."""
    frame: FrameType | None = sys._getframe(1)
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


@dataclass(frozen=True)
class Alias:
    """Another parameter name for a buffer declared in `args`: a pipeline whose launcher passes one
    buffer as `rms` to one kernel and as `d_rms` to the next says `"d_rms": Alias("rms")`. The
    kernels then get the same device pointer; the reference sees (and returns) it as `rms`."""

    target: str
    line: int = field(default=0, compare=False)

    kind = "alias"
    is_input = False
    is_output = False

    def __post_init__(self) -> None:
        if not self.line:
            object.__setattr__(self, "line", _caller_line())


Arg = In | Out | InOut | Scratch | Scalar | Alias


@dataclass
class Spec:
    """What a kernel (`kernel=`) or a host function (`entry=`: a launcher with a C-compatible
    signature, called by the worker with the spec's buffers and scalars) must compute."""

    kernel: str = ""
    sizes: list[dict[str, int]] = field(default_factory=list)
    args: dict[str, Arg] = field(default_factory=dict)
    reference: Callable[..., Any] | None = None
    pipeline: list[str] | None = None
    timing_sizes: list[dict[str, int]] | None = None
    work: Callable[..., Mapping[str, float]] | None = None
    # True: add small awkward sizes (all sizes 1, all 97) to the verification cases; a list: those.
    edge_sizes: bool | list[dict[str, int]] = True
    seed: int = 0
    name: str | None = None  # shown in reports; default: the kernel
    # A host function to call instead of launching a kernel (see kernel_lsp/host_entry.py).
    entry: str | None = None
    # The original `.cu` (a path relative to the spec file) whose entry of the same name is the
    # oracle where the spec gives no reference (differential testing), and must agree otherwise.
    baseline: str | None = None
    # Sizes computed from the others in every case ({"nnz": "rows * 16"}); `sizes` gives the rest.
    derived_sizes: dict[str, str | int] | None = None
    # A function of sizes by name that says whether a case makes sense (`lambda rows, nnz: nnz >=
    # rows`): edge sizes that fail it are left out, and a case of `sizes` that fails it is an error.
    sizes_valid: Callable[..., bool] | None = None
    line: int = field(default=0, compare=False)
    path: str = field(default="", compare=False)  # the spec file (set by load_specs)

    def __post_init__(self) -> None:
        if not self.line:
            self.line = _caller_line()
        if self.entry and not self.kernel:
            self.kernel = self.entry  # the name results and requests go by

    @property
    def is_entry(self) -> bool:
        return bool(self.entry)

    def baseline_path(self) -> str | None:
        """The baseline file, resolved against the spec file's folder."""
        if not self.baseline:
            return None
        return os.path.join(os.path.dirname(os.path.abspath(self.path or ".")), self.baseline)

    @property
    def title(self) -> str:
        return self.name or self.kernel

    @property
    def kernels(self) -> list[str]:
        """The kernels launched, in order (the pipeline, or just the kernel); none for an entry,
        whose launches are its own."""
        if self.is_entry:
            return []
        return list(self.pipeline) if self.pipeline else [self.kernel]

    @property
    def size_names(self) -> list[str]:
        """The sizes a case gives (not the derived ones)."""
        names: list[str] = []
        for s in self.sizes:
            names += [k for k in s if k not in names]
        return names

    def complete(self, sizes: Mapping[str, Any]) -> dict[str, Any]:
        """A case's sizes with the derived sizes added, in order (one may use an earlier one)."""
        full = dict(sizes)
        for name, expr in (self.derived_sizes or {}).items():
            full[name] = int(eval_expr(expr, full))
        return full

    def valid(self, sizes: Mapping[str, Any]) -> bool:
        """Whether `sizes_valid` accepts a (complete) case; True without one."""
        return self.sizes_valid is None or bool(call_with_names(self.sizes_valid, dict(sizes)))

    def edge_cases(self) -> list[dict[str, int]]:
        """The edge sizes (complete), those `sizes_valid` rejects left out."""
        if self.edge_sizes is True and self.sizes:
            names = self.size_names
            edges = [dict.fromkeys(names, 1), dict.fromkeys(names, 97)]
        elif isinstance(self.edge_sizes, list):
            edges = [dict(s) for s in self.edge_sizes]
        else:
            edges = []
        full = [self.complete(e) for e in edges]
        return [e for e in full if self.valid(e)]

    def verification_sizes(self) -> list[dict[str, int]]:
        """The spec's sizes, plus edge sizes, without repeats, smallest first; each complete."""
        sizes = [self.complete(s) for s in self.sizes]
        for e in self.edge_cases():
            if e not in sizes:
                sizes.append(e)
        return sizes

    def timing_cases(self) -> list[dict[str, int]]:
        if self.timing_sizes:
            return [self.complete(s) for s in self.timing_sizes]
        if not self.sizes:
            return []
        full = [self.complete(s) for s in self.sizes]
        return [max(full, key=lambda s: math.prod(max(1, int(v)) for v in s.values()))]

    def buffers(self) -> dict[str, _Buffer]:
        """The buffers that are allocated: every In, Out, InOut and Scratch (not their aliases)."""
        return {k: a for k, a in self.args.items() if not isinstance(a, (Scalar, Alias))}

    def buffer(self, name: str) -> _Buffer:
        """The buffer `name` (an In, Out, InOut or Scratch); KeyError for a Scalar or an Alias."""
        arg = self.args[name]
        if isinstance(arg, (Scalar, Alias)):
            raise KeyError(name)
        return arg

    def buffer_name(self, param: str) -> str:
        """The buffer a parameter gets: itself, or the target of its Alias."""
        arg = self.args.get(param)
        return arg.target if isinstance(arg, Alias) else param

    def aliases(self) -> dict[str, str]:
        """{alias: the buffer it names}."""
        return {k: a.target for k, a in self.args.items() if isinstance(a, Alias)}

    def outputs(self) -> dict[str, _Buffer]:
        return {k: a for k, a in self.buffers().items() if a.is_output}

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
