"""What host code says about kernel launches, as plain data: each launch's kernel, grid, block and
dynamic shared memory (values, expressions over the launcher's parameters, or why neither), the
arguments it passes, and the host functions around the launches (parameters, temporaries)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from ..constants.cexpr import Expr, Num, free_names, int_value, rename, to_c, to_python
from ..lexer import split_top
from ..source import Param


@dataclass(frozen=True)
class Quantity:
    """A launch quantity: a grid or block (three dimensions) or the dynamic shared memory (one),
    as ints, as expressions over the launcher's parameters, or unresolved with the reason."""

    text: str  # as written: "grid", "dim3(16, 16)", "(n + 255) / 256"
    dims: tuple[Expr, ...] | None = None  # None: unresolved
    reason: str = ""

    @property
    def resolved(self) -> bool:
        return self.dims is not None

    @property
    def value(self) -> tuple[int, ...] | None:
        """Every dimension's int, or None when some depend on the launcher's parameters."""
        if self.dims is None:
            return None
        values = [int_value(d) for d in self.dims]
        ints = [v for v in values if isinstance(v, int)]
        return tuple(ints) if len(ints) == len(values) else None

    @property
    def total(self) -> int | None:
        """Threads of a block (or bytes of shared memory): the product of the dimensions."""
        v = self.value
        return math.prod(v) if v is not None else None

    @property
    def symbols(self) -> list[str]:
        """The launcher's parameters the quantity depends on."""
        return list(dict.fromkeys(n for d in self.dims or () for n in free_names(d)))

    def python(self, names: dict[str, str] | None = None) -> str | None:
        """The launch comment's form, over `names` (a launcher parameter -> a spec size):
        `cdiv(n, 256)`, `(cdiv(cols, 16), cdiv(rows, 16))`, `256`."""
        if self.dims is None:
            return None
        dims = [rename(d, names) if names else d for d in self.dims]
        while len(dims) > 1 and dims[-1] == Num(1):
            dims.pop()
        texts = [to_python(d) for d in dims]
        return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"

    def describe(self) -> str:
        """For hover and the CLI: `256`, `(16, 16)`, `(n + 255) / 256`, or the text as written."""
        if self.dims is None:
            return self.text
        dims = list(self.dims)
        while len(dims) > 1 and dims[-1] == Num(1):
            dims.pop()
        texts = [to_c(d) for d in dims]
        return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"


@dataclass(frozen=True)
class LaunchArgument:
    """One argument of a launch: which kernel parameter gets what from the launcher."""

    param: str  # the kernel's parameter name ("" when the kernel's signature is not in the file)
    text: str  # the argument as written: "d_x", "(double*)out", "input.data_ptr<scalar_t>()"
    source: str = ""  # the launcher variable it passes ("d_x", "out", "input"; "" for an expression)
    launcher_param: bool = False  # `source` is a parameter of the launcher
    temporary: bool = False  # `source` was allocated in the launcher (cudaMalloc and friends)
    value: Quantity | None = None  # for a scalar: its value or expression, when it has one


@dataclass(frozen=True)
class LaunchShape:
    """Grid, block and dynamic shared memory of one launch."""

    grid: Quantity
    block: Quantity
    smem: Quantity

    @property
    def resolved(self) -> bool:
        return self.grid.resolved and self.block.resolved and self.smem.resolved

    @property
    def reasons(self) -> list[str]:
        return [q.reason for q in (self.grid, self.block, self.smem) if q.reason]


@dataclass(frozen=True)
class HostLaunch:
    """One kernel launch in host code."""

    kernel: str  # the kernel's function name: "saxpy", "silu_and_mul_kernel"
    written: str  # as written: "vllm::silu_and_mul_kernel<scalar_t, 1>"
    template_args: tuple[str, ...]  # constants evaluated: ("scalar_t", "1")
    kind: str  # "<<<>>>" | "cudaLaunchKernel" | "cudaLaunchCooperativeKernel" | "cudaLaunchKernelEx"
    line: int  # 1-based, of the kernel's name at the launch (of the macro call for a macro's launch)
    col: int
    function: str  # the enclosing host function ("" when there is none)
    grid: Quantity
    block: Quantity
    smem: Quantity
    stream: str = ""
    arguments: tuple[LaunchArgument, ...] = ()
    macro: str = ""  # the macro whose body holds the launch, when it comes from one
    # The same launch over the kernel's own parameters where the launcher passes a name to one
    # (what a kernel spec's sizes are named after): `vector_add(.., int length)` passing `length`
    # as the kernel's `n` has grid `cdiv(length, 256)` here and `cdiv(n, 256)` there.
    in_kernel_terms: LaunchShape | None = None

    @property
    def instance(self) -> str:
        return f"{self.kernel}<{', '.join(self.template_args)}>" if self.template_args else self.kernel

    @property
    def cooperative(self) -> bool:
        return self.kind == "cudaLaunchCooperativeKernel"

    @property
    def resolved(self) -> bool:
        return self.grid.resolved and self.block.resolved and self.smem.resolved

    @property
    def reasons(self) -> list[str]:
        return [q.reason for q in (self.grid, self.block, self.smem) if q.reason]

    def where(self, path: str = "") -> str:
        """`the launch at saxpy.cu:88 in `launch_saxpy``: where a figure came from."""
        at = f"{os.path.basename(path)}:{self.line}" if path else f"line {self.line}"
        inside = f" in `{self.function}`" if self.function else ""
        via = f" (through macro `{self.macro}`)" if self.macro else ""
        return f"the launch at {at}{inside}{via}"


@dataclass(frozen=True)
class HostCall:
    """A CUDA runtime call of a host function, in order (allocations, copies, memsets, syncs)."""

    name: str  # "cudaMalloc", "cudaMemsetAsync"
    args: tuple[str, ...]
    line: int
    target: str = ""  # the buffer it allocates, sets, copies into or frees ("d_tmp")
    bytes: Quantity | None = None  # the size it allocates, sets or copies


@dataclass(frozen=True)
class Guard:
    """A condition at the top of a launcher's body under which it does no work (`if (n % 4 != 0)
    return -1;`) or stops (`assert(n <= 1024)`, negated): the sizes it refuses, as an expression
    over the launcher's parameters (None where it reads other things: a pointer, a call)."""

    condition: Quantity  # true: the launcher refuses these sizes
    line: int
    text: str  # as written


@dataclass(frozen=True)
class HostFunction:
    """A function of the file with a body: a launcher when it launches kernels."""

    name: str
    params: tuple[Param, ...]
    return_type: str
    line: int
    col: int
    extern_c: bool = False
    template_params: tuple[str, ...] = ()
    qualifiers: tuple[str, ...] = ()  # "static", "inline", "__global__", "__host__", ...
    launches: tuple[HostLaunch, ...] = ()
    calls: tuple[HostCall, ...] = ()
    guards: tuple[Guard, ...] = ()

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers

    @property
    def kernels(self) -> list[str]:
        """The kernels it launches, in order (a kernel launched twice is listed twice)."""
        return [launch.kernel for launch in self.launches]

    @property
    def allocations(self) -> list[HostCall]:
        return [c for c in self.calls if c.name.startswith("cudaMalloc")]

    @property
    def memsets(self) -> list[HostCall]:
        return [c for c in self.calls if c.name.startswith("cudaMemset")]

    @property
    def temporaries(self) -> list[str]:
        """Device buffers it allocates itself (not given by its caller)."""
        return list(dict.fromkeys(c.target for c in self.allocations if c.target))

    @property
    def buffers(self) -> dict[str, list[tuple[int, str]]]:
        """Each launcher variable passed to a kernel -> (launch index, kernel parameter) for each
        place it is passed: one buffer under different names in a pipeline (`d_rms` as `rms`)."""
        out: dict[str, list[tuple[int, str]]] = {}
        for i, launch in enumerate(self.launches):
            for a in launch.arguments:
                if a.source and a.param:
                    out.setdefault(a.source, []).append((i, a.param))
        return out

    @property
    def signature(self) -> str:
        params = ", ".join(f"{p.type} {p.name}" for p in self.params)
        return f"{'extern ' + chr(34) + 'C' + chr(34) + ' ' if self.extern_c else ''}{self.return_type} {self.name}({params})"


@dataclass(frozen=True)
class LaunchBounds:
    """`__launch_bounds__(max_threads[, min_blocks])` of a kernel."""

    kernel: str
    max_threads: str  # as written
    min_blocks: str
    line: int
    template_params: tuple[str, ...] = ()


@dataclass
class HostCode:
    """Everything read from one file's host code; `problems` lists what could not be read."""

    functions: list[HostFunction] = field(default_factory=list)
    launches: list[HostLaunch] = field(default_factory=list)  # every launch, in source order
    bounds: dict[str, LaunchBounds] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def launches_of(self, kernel: str) -> list[HostLaunch]:
        """The launches of `kernel`: a plain name (`saxpy`) matches every instance; an instance
        (`scale<float>`) matches launches of that instance and launches whose template arguments
        are not known here (`scale<scalar_t>`)."""
        return [launch for launch in self.launches if launch_matches(launch, kernel)]

    def function(self, name: str) -> HostFunction | None:
        return next((f for f in self.functions if f.name == name and not f.is_kernel), None)

    @property
    def launchers(self) -> list[HostFunction]:
        """Host functions that launch kernels."""
        return [f for f in self.functions if f.launches and not f.is_kernel]


# Template arguments that name one instance; any other word (`T`, `scalar_t`) may be any of them.
_KNOWN_TYPES = frozenset(
    {
        "float",
        "double",
        "int",
        "unsigned",
        "unsigned int",
        "long",
        "unsigned long",
        "long long",
        "char",
        "bool",
        "half",
        "__half",
        "__nv_bfloat16",
        "nv_bfloat16",
        "int8_t",
        "uint8_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
        "float2",
        "float4",
        "size_t",
        "true",
        "false",
    }
)


def _normal_arg(text: str) -> str:
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", " ".join(text.replace("std::", "").split()))
    return text


def _known(arg: str) -> bool:
    return arg in _KNOWN_TYPES or re.fullmatch(r"-?\d+", arg) is not None


def launch_matches(launch: HostLaunch, kernel: str) -> bool:
    """Whether `launch` launches `kernel` (a name, an instance `scale<float>`, `ns::k`, or an
    overload `relu(float*, int)`): template arguments the launch leaves open match any."""
    name = re.sub(r"\s*\[.*\]$|\(.*\)$", "", kernel.strip())
    head, lt, rest = name.partition("<")
    if head.strip().rpartition("::")[2] != launch.kernel:
        return False
    if not lt or not launch.template_args:
        return True
    wanted = [_normal_arg(a) for a in split_top(rest.rsplit(">", 1)[0]) if a]
    given = [_normal_arg(a) for a in launch.template_args]
    if len(wanted) != len(given):
        return False
    return all(g == w or not _known(g) for g, w in zip(given, wanted, strict=True))
