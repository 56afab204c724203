"""Spec skeletons: the text of a `X.spec.py` for a kernel (or the kernels of a pipeline) that has
none, for the code action and `kernel-lsp spec`.

What the kernel's body says (kernel_use.py) decides each argument: its kind (a buffer read and then
written is InOut, one accumulated with atomics is InOut starting from zeros, one only written is
Out), its shape (from the strides of its index expressions and the bounds of its indices: `A[row *
K + k]` under `row < M` is (M, K)), and for a CSR-style offsets array and the indices it gathers
through, distributions that draw consistent values from the sizes. Integer parameters that bound
or stride an index are sizes; a float parameter gets a value to test with. Whatever the skeleton
guesses is marked `TODO(kernel-lsp)`, which `--check` reports until the user deletes it. Sizes stay
small when there is more than one, so that no skeleton allocates more than a few MiB before the
user has looked at it."""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .constants.cexpr import Num
from .host_launch.launcher import (
    Temporary,
    launcher_for,
    launches_of,
    library_launcher,
    one_buffer_names,
    pipelines,
    temporaries,
)
from .host_launch.model import HostFunction, HostLaunch, LaunchArgument
from .host_launch.occupancy import host_code
from .host_launch.spec_launch import spec_launch
from .index_expr import parse_index, poly_text
from .kernel_use import BufferUse, Extent, KernelUse, kernel_body, read_kernel
from .lexer import blank_comments, matching, parenthesized, split_top
from .source import (
    Directives,
    KernelSignature,
    LaunchDirective,
    find_kernel,
    find_kernels,
    parse_directives,
)
from .spec import C_TYPES, DTYPES, c_type_dtype, source_constants
from .spec.loading import SKELETON_TODO

_SIZE_LIKE = re.compile(
    r"^(n|m|k|len|length|size|count|num\w*|n_\w+|n[A-Z]\w*|\w*_size|\w*Size|\w*_len|rows|cols|width|height|"
    r"batch|dim|\w+_dim|depth)$",
    re.I,
)
ONE_D_SIZES = (1, 1000, 1_000_003)
# Several size names: each case keeps every 2-D buffer under 256 x 256 elements, every 3-D one
# under 64 x 64 x 64.
MULTI_D_SIZES = ((1,), (33, 41, 49, 57), (256,))
THREE_D_SIZES = ((1,), (5, 7, 9, 11), (64,))
_BOUND = re.compile(r"\b([A-Za-z_]\w*)\s*(<|<=|>=)\s*([A-Za-z_]\w*)\b")
_EPSILON = re.compile(r"eps|epsilon", re.I)
# Float scalars to test with, one each, all different: an integral's bounds `a` and `b`, or
# `alpha` and `beta`, given one value would make the case degenerate (an empty range, a - b = 0).
FLOAT_VALUES = ("1.5", "2.5", "0.75", "3.25", "-0.5", "4.0")


@dataclass
class _Arg:
    kind: str  # In, Out, InOut, Scratch, Scalar, Alias
    dtype: str
    shape: str = ""
    dist: str = ""
    value: str = ""  # a Scalar's value ("" for a size), the buffer an Alias names
    notes: list[str] = field(default_factory=list)
    zero: bool = False  # a Scratch the launcher zeroes

    def text(self, name: str) -> str:
        if self.kind == "Scalar":
            body = f'Scalar("{self.dtype}"' + (f", {self.value}" if self.value else "") + ")"
        elif self.kind == "Alias":
            body = f"Alias({_quote(self.value)})"
        else:
            extra = (f", dist={self.dist}" if self.dist else "") + (", zero=True" if self.zero else "")
            body = f'{self.kind}("{self.dtype}", shape="{self.shape}"{extra})'
        note = f"  # {SKELETON_TODO}: {'; '.join(self.notes)}" if self.notes else ""
        return f"        {_quote(name)}: {body},{note}"


def _quote(name: str) -> str:
    return f'"{name}"'


# --- the kernel's name, template instance and element types -----------------------------------


def template_params(source: str, signature: KernelSignature) -> list[tuple[str, str]]:
    """[(kind, name)] of the kernel's `template <typename T, int BLOCK>` ([] for a plain kernel)."""
    if not signature.templated:
        return []
    code = blank_comments(source)
    lines = code.split("\n")
    offset = sum(len(ln) + 1 for ln in lines[: signature.line - 1])
    window = code[max(0, offset - 400) : offset + signature.col]
    found = list(re.finditer(r"template\s*<", window))
    close = matching(window, found[-1].end() - 1) if found else -1
    if close < 0:
        return []
    out = []
    for part in split_top(window[found[-1].end() : close]):
        words = part.split("=")[0].split()
        if len(words) >= 2:
            out.append((" ".join(words[:-1]), words[-1]))
    return out


def instance_args(source: str, signature: KernelSignature) -> list[str] | None:
    """The template arguments of an instance the file names concretely (`MatrixMulCUDA<32><<<`,
    `template __global__ void k<256u>(...)`), else float for each type parameter; None when an
    argument cannot be chosen."""
    params = template_params(source, signature)
    if not params:
        return None
    code = blank_comments(source)
    # `typedef float floatX;` and `using floatX = float;` name the types instances are written in.
    aliases = dict(re.findall(r"\btypedef\s+([\w ]+?)\s+(\w+)\s*;", code))
    aliases = {new: old for old, new in aliases.items()}
    aliases.update(re.findall(r"\busing\s+(\w+)\s*=\s*([\w ]+?)\s*;", code))
    for m in re.finditer(rf"\b{re.escape(signature.name)}\s*<([^<>;{{}}()]*)>\s*(?:<<<|\()", code):
        args = [aliases.get(a.strip(), a.strip()) for a in m.group(1).split(",")]
        if len(args) == len(params) and all(re.fullmatch(r"-?\d+[uUlL]*", a) or a in C_TYPES for a in args):
            return args
    if all(kind in ("typename", "class") for kind, _ in params):
        return ["float"] * len(params)
    return None


def kernel_name(source: str, signature: KernelSignature) -> tuple[str, dict[str, str], dict[str, int]]:
    """(the spec's kernel name, template type parameter -> C type, template value -> int)."""
    args = instance_args(source, signature)
    params = template_params(source, signature)
    if not params:
        return signature.name, {}, {}
    if args is None:
        return signature.name, {}, {}
    types = {
        name: arg for (kind, name), arg in zip(params, args, strict=True) if kind in ("typename", "class")
    }
    values = {
        name: int(re.sub(r"[uUlL]+$", "", arg))
        for (kind, name), arg in zip(params, args, strict=True)
        if kind not in ("typename", "class")
    }
    return f"{signature.name}<{', '.join(args)}>", types, values


def _dtype(c_type: str, types: dict[str, str]) -> str | None:
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", c_type)
    base = " ".join(base.replace("*", " ").replace("&", " ").split())
    return c_type_dtype(types.get(base, base))


# --- reading a kernel into arguments --------------------------------------------------------------


@dataclass
class _Plan:
    kernel: str
    pipeline: list[str]
    args: dict[str, _Arg]
    sizes: list[str]
    most_dims: int
    invented: list[str]
    # An invented size -> the index it bounds (`num_rows` -> `row`): an entry's launch may say.
    open_vars: dict[str, str] = field(default_factory=dict)


def _size_params(sig: KernelSignature, use: KernelUse, types: dict[str, str]) -> list[str]:
    return [
        p.name
        for p in sig.params
        if not p.is_pointer
        and (_dtype(p.type, types) or "").startswith(("int", "uint"))
        and (p.name in use.sizes or _SIZE_LIKE.match(p.name))
    ]


def _open_names(uses: dict[str, BufferUse], sizes: list[str], offsets: bool) -> dict[str, str]:
    """A size for each open dimension: the one size parameter no dimension uses yet, or a name
    made from the index (`token_idx` -> `num_tokens`, gathered columns of CSR -> `cols`)."""
    used = {s for u in uses.values() for d in u.dims or [] for s in re.findall(r"[A-Za-z_]\w*", d.text)}
    unused = [s for s in sizes if s not in used]
    opens = list(dict.fromkeys(d.open_var for u in uses.values() for d in u.dims or [] if d.open_var))
    names: dict[str, str] = {}
    if len(opens) == 1 and len(unused) == 1:
        names[opens[0]] = unused[0]
    for var in opens:
        if var not in names:
            base = re.sub(r"(_?idx|_?id|_?index)$", "", var.split(".")[0]) or "item"
            base = re.sub(r"\W", "_", base)
            base = {"blockIdx": "block", "threadIdx": "thread", "row": "row", "b": "batch"}.get(base, base)
            names[var] = base if base == "batch" else f"num_{base}s"
    for u in uses.values():
        for d in u.dims or []:
            if d.offsets_of:
                names.setdefault(f"offsets:{d.offsets_of}", "nnz")
    for name, u in uses.items():
        for d in u.dims or []:
            if d.gathered_from:
                names.setdefault(f"gather:{d.gathered_from}:{name}", "cols" if offsets else f"{name}_rows")
    return names


def _extent_text(
    d: Extent, buffer: str, names: dict[str, str], launched: frozenset[str] = frozenset()
) -> tuple[str, bool]:
    """(the size expression, whether it is a guess); `launched`: the open indices whose extent
    the kernel's launch gives."""
    if d.text:
        return d.text, False
    if d.offsets_of:
        return names[f"offsets:{d.offsets_of}"], True
    if d.gathered_from:
        return names[f"gather:{d.gathered_from}:{buffer}"], True
    return names.get(d.open_var, ""), d.open_var not in launched


def launch_extent(body: str, var: str, grid: str, block: str) -> str:
    """How far an index the kernel does not bound runs under its launch (grid and block in the
    launch line's form): `row = blockIdx.x` under grid `rows` runs to rows; `i = blockIdx.x *
    blockDim.x + threadIdx.x` under grid `cdiv(n, 256)` and block 256 to n; "" when neither."""
    rhs = var
    if not var.startswith(("blockIdx", "threadIdx")):
        m = re.search(rf"\b{re.escape(var)}\s*=(?!=)\s*([^;,]+)[;,]", body)
        if not m:
            return ""
        rhs = m.group(1)
    rhs = " ".join(rhs.replace("(", " ").replace(")", " ").split())
    g, b = _launch_dims(grid), _launch_dims(block)
    m = re.fullmatch(r"blockIdx\.([xyz])", rhs)
    if m:
        return g["xyz".index(m.group(1))]
    terms = sorted(t.strip() for t in rhs.split("+"))
    for axis in "xyz":
        products = {
            f"blockIdx.{axis} * blockDim.{axis}",
            f"blockDim.{axis} * blockIdx.{axis}",
        }
        if len(terms) == 2 and terms[1] == f"threadIdx.{axis}" and terms[0] in products:
            i = "xyz".index(axis)
            c = re.fullmatch(r"cdiv\((.+), (\w+)\)", g[i])
            if c and c.group(2) == b[i]:
                return c.group(1)
            return g[i] if b[i] == "1" else f"{g[i]} * {b[i]}"
    return ""


def _launch_dims(text: str) -> list[str]:
    text = " ".join(text.split())
    parts = [p for p in split_top(text[1:-1]) if p] if parenthesized(text) else [text]
    return [*parts, "1", "1", "1"][:3]


def _plan(
    source: str,
    sigs: list[KernelSignature],
    names_in_order: list[str],
    directives: Directives | None,
    launcher_fn: HostFunction | None = None,
) -> _Plan:
    constants = source_constants(source)
    args: dict[str, _Arg] = {}
    sizes: list[str] = []
    invented: list[str] = []
    most_dims = 1
    first_kernel = ""
    open_vars: dict[str, str] = {}
    launcher = _Launcher.of(source, names_in_order, sigs, launcher_fn)
    for sig in sigs:
        name, types, values = kernel_name(source, sig)
        first_kernel = first_kernel or name
        use = read_kernel(kernel_body(source, sig), sig, {**constants, **values}, source)
        passed = launcher.arguments(sig.name)
        size_params = [n for n in _size_params(sig, use, types) if not launcher.fixed_value(passed.get(n))]
        host = host_launch_of(sig, directives, source)
        # Names the launch reads are sizes too: the kernel's integer parameters it uses, and
        # launcher parameters it reads that the kernel does not get (the spec must give those).
        size_params += [n for n in (host.symbols if host else ()) if n not in size_params]
        sizes += [s for s in size_params if s not in sizes]
        offsets = any(u.offsets for u in use.buffers.values())
        names = _open_names(use.buffers, size_params, offsets)
        launched = _launched_extents(source, sig, directives, names, launcher)
        names.update(launched)
        open_vars.update(
            {
                v: k
                for k, v in names.items()
                if not k.startswith(("offsets:", "gather:")) and k not in launched
            }
        )
        for p in sig.params:
            dtype = _dtype(p.type, types)
            notes = [] if dtype else [f"element type of `{p.type}`"]
            dtype = dtype or "float32"
            if p.name in args:
                if (
                    p.is_pointer
                    and args[p.name].kind == "In"
                    and _kind(p.is_const, use.buffers[p.name]) != "In"
                ):
                    args[p.name].kind = "InOut"  # read by an earlier step, written by this one
                continue
            if not p.is_pointer:
                floats = sum(1 for a in args.values() if a.kind == "Scalar" and a.value in FLOAT_VALUES)
                args[p.name] = _scalar(
                    p.name, dtype, p.name in size_params, notes, passed.get(p.name), floats
                )
                continue
            if p.name in launcher.aliases:
                args[p.name] = _Arg("Alias", dtype, value=launcher.aliases[p.name])
                continue
            u = use.buffers[p.name]
            arg = _Arg(_kind(p.is_const, u), dtype, notes=notes)
            if u.atomic and arg.kind == "InOut":
                arg.dist = '"zeros"'
            scratch = launcher.scratch(passed.get(p.name))
            if scratch is not None:
                arg.kind, arg.dist, arg.zero = "Scratch", "", scratch.zeroed
                allocated = launcher.elements(scratch, dtype)
                if allocated:
                    # A launcher parameter the allocation reads is a size too (the spec gives it).
                    invented += [s for s in _names(allocated) if s not in sizes and s not in invented]
                    arg.shape = allocated
                    args[p.name] = arg
                    continue
            shape, guessed = _shape(p.name, u, names, sizes, frozenset(launched))
            invented += [s for s in _names(shape) if s not in sizes and s not in invented]
            arg.shape = shape or (sizes[0] if sizes else "n")
            if not shape:
                arg.notes.append("shape (not read from the kernel's indexing)")
            elif guessed:
                arg.notes.append("shape (a size the kernel does not bound is a guess)")
            most_dims = max(most_dims, shape.count(",") + 1 if shape.startswith("(") else 1)
            args[p.name] = arg
        _sparse_dists(use, args, names)
    all_sizes = sizes + [s for s in invented if s not in sizes]
    if not all_sizes:
        all_sizes = ["n"]
    return _Plan(
        first_kernel,
        names_in_order,
        args,
        all_sizes,
        most_dims,
        invented,
        {n: v for n, v in open_vars.items() if n in invented},
    )


def _launched_extents(
    source: str,
    sig: KernelSignature,
    directives: Directives | None,
    names: dict[str, str],
    launcher: _Launcher,
) -> dict[str, str]:
    """{open index: its extent} for the indices the kernel leaves unbounded that its launch
    bounds (the launch line, else the launcher's launch, else the file's first), in the kernel's
    terms."""
    grid = block = None
    comments = directives.launches_of(sig.name) if directives is not None else []
    if comments:
        grid, block = comments[0].grid, comments[0].block
    else:
        x = launcher.launches.get(sig.name)
        terms = x.in_kernel_terms if x is not None else None
        if terms is not None and terms.grid.resolved and terms.block.resolved:
            grid, block = terms.grid.python(), terms.block.python()
        else:
            hint = host_launch_of(sig, directives, source)
            if hint is not None and hint.directive is not None:
                grid, block = hint.directive.grid, hint.directive.block
    if not grid or not block:
        return {}
    body = kernel_body(source, sig) if source else ""
    out = {}
    for var in names:
        if var.startswith(("offsets:", "gather:")):
            continue
        extent = launch_extent(body, var, grid, block)
        if extent:
            out[var] = extent
    return out


def _names(expression: str) -> list[str]:
    """The sizes a shape expression names (not the helpers it calls: `cdiv(n, 256)` is `n`)."""
    return [m.group(1) for m in re.finditer(r"\b([A-Za-z_]\w*)\b(?!\s*\()", expression)]


def _kind(const: bool, use: BufferUse) -> str:
    if const:
        return "In"
    if use.atomic or use.updates:
        return "InOut"
    return "Out" if use.writes else "In"


def _scalar(
    name: str, dtype: str, is_size: bool, notes: list[str], passed: LaunchArgument | None, floats: int = 0
) -> _Arg:
    """A size, or a value: the literal the launcher passes, else one to test with."""
    literal = _literal(passed)
    if dtype.startswith(("int", "uint")):
        if is_size:
            return _Arg("Scalar", dtype, notes=notes)
        if isinstance(literal, int):
            return _Arg("Scalar", dtype, value=str(literal), notes=notes)
        return _Arg("Scalar", dtype, value="1", notes=[*notes, "a value or size expression"])
    if literal is not None:
        return _Arg("Scalar", dtype, value=repr(float(literal)), notes=notes)
    value = "1e-5" if _EPSILON.search(name) else FLOAT_VALUES[floats % len(FLOAT_VALUES)]
    return _Arg("Scalar", dtype, value=value, notes=notes)


def _literal(passed: LaunchArgument | None) -> int | float | None:
    """The number a launch passes for a parameter (`2.0f`, `NUM_BLOCKS` = 128), when it is one."""
    dims = passed.value.dims if passed is not None and passed.value is not None else None
    if dims and len(dims) == 1 and isinstance(dims[0], Num) and not isinstance(dims[0].value, bool):
        return dims[0].value
    return None


@dataclass
class _Launcher:
    """What the host function that launches the kernels passes them, when the file has one."""

    fn: HostFunction | None = None
    launches: dict[str, HostLaunch] = field(default_factory=dict)  # kernel -> its first launch
    aliases: dict[str, str] = field(default_factory=dict)  # parameter -> the one it shares a buffer with
    temps: dict[str, Temporary] = field(default_factory=dict)
    sizes: dict[str, str] = field(default_factory=dict)  # launcher parameter -> kernel parameter

    @classmethod
    def of(
        cls, source: str, kernels: list[str], sigs: list[KernelSignature], fn: HostFunction | None = None
    ) -> _Launcher:
        fn = fn or (launcher_for(host_code(source), kernels) if source else None)
        if fn is None:
            return cls()
        launches: dict[str, HostLaunch] = {}
        for launch in launches_of(fn, kernels):
            launches.setdefault(launch.kernel, launch)
        pointers = {p.name for sig in sigs for p in sig.params if p.is_pointer}
        sizes = {a.source: a.param for x in launches.values() for a in x.arguments if a.launcher_param}
        return cls(fn, launches, one_buffer_names(fn, kernels, pointers), temporaries(fn), sizes)

    def arguments(self, kernel: str) -> dict[str, LaunchArgument]:
        launch = self.launches.get(kernel)
        return {a.param: a for a in launch.arguments if a.param} if launch else {}

    def fixed_value(self, passed: LaunchArgument | None) -> bool:
        """A library launcher (not `main`) passing a constant: a value, not a size."""
        return (
            self.fn is not None
            and library_launcher(self.fn)
            and passed is not None
            and not passed.launcher_param
            and isinstance(_literal(passed), int)
        )

    def scratch(self, passed: LaunchArgument | None) -> Temporary | None:
        return self.temps.get(passed.source) if passed is not None and passed.source else None

    def elements(self, temp: Temporary, dtype: str) -> str:
        """The temporary's element count from its allocation (`NUM_BLOCKS * sizeof(float)` -> 128,
        `n * sizeof(float)` -> n), or "" when it cannot be read."""
        if temp.allocation is None or temp.allocation.bytes is None:
            return ""
        text = temp.allocation.bytes.python(self.sizes)
        total = parse_index(text.replace("//", "/")) if text else None
        itemsize = DTYPES[dtype].itemsize
        if total is None or any(c % itemsize for c in total.values()):
            return ""
        return poly_text({m: c // itemsize for m, c in total.items()})


def _shape(
    buffer: str,
    use: BufferUse,
    names: dict[str, str],
    sizes: list[str],
    launched: frozenset[str] = frozenset(),
) -> tuple[str, bool]:
    if not use.dims:
        return "", False
    texts, guessed = [], False
    for d in use.dims:
        text, guess = _extent_text(d, buffer, names, launched)
        if not text:
            return "", False
        texts.append(text)
        guessed = guessed or guess
    # (cdiv(n, 256), 256): one run of n elements, indexed by block and thread.
    c = re.fullmatch(r"cdiv\((.+), (\w+)\)", texts[0]) if len(texts) > 1 else None
    if c and " * ".join(texts[1:]) == c.group(2):
        texts = [c.group(1)]
    return (texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"), guessed


def _sparse_dists(use: KernelUse, args: dict[str, _Arg], names: dict[str, str]) -> None:
    """An offsets array (`row_ptr[row]`, `row_ptr[row + 1]`) gets sorted offsets from 0 to nnz; an
    index array whose values index another buffer gets integers below that buffer's extent."""
    for name, u in use.buffers.items():
        arg = args.get(name)
        if arg is None or arg.dist:
            continue
        if u.offsets and u.dims and len(u.dims) == 1 and u.dims[0].text.endswith("+ 1"):
            rows = u.dims[0].text[: -len("+ 1")].strip()
            nnz = names.get(f"offsets:{name}", "nnz")
            if re.fullmatch(r"[A-Za-z_]\w*", rows):
                arg.dist = (
                    f"lambda rng, {rows}, {nnz}: np.concatenate([[0], np.sort(rng.integers(0, {nnz} + 1, "
                    f"{rows} - 1)), [{nnz}]])"
                )
        for target, dim in u.gathers_into:
            shape = args[target].shape if target in args else ""
            dims = [s.strip() for s in shape.strip("()").split(",")] if shape else []
            if dim < len(dims) and re.fullmatch(r"[A-Za-z_]\w*", dims[dim]):
                arg.dist = f"lambda rng, shape, {dims[dim]}: rng.integers(0, {dims[dim]}, shape)"
                break


# --- the text ---------------------------------------------------------------------------------


def _bounds(body: str, sizes: list[str]) -> dict[str, str]:
    """Index variable -> the size it is compared against (`i < n`, `row >= M`, `k < K`)."""
    bounds: dict[str, str] = {}
    for var, _, size in _BOUND.findall(body):
        if size in sizes and var not in sizes:
            bounds.setdefault(var, size)
    return bounds


def _launch_hint(signature: KernelSignature, body: str, sizes: list[str]) -> str:
    bounds = _bounds(body, sizes)
    axis_var = {}
    for axis in "xy":
        m = re.search(rf"\b([A-Za-z_]\w*)\s*=[^;]*threadIdx\.{axis}", body)
        if m and m.group(1) in bounds:
            axis_var[axis] = bounds[m.group(1)]
    if len(axis_var) == 2:
        return (
            f"// kernel-lsp: launch {signature.name} grid=(cdiv({axis_var['x']}, 16), "
            f"cdiv({axis_var['y']}, 16)) block=(16, 16)"
        )
    return f"// kernel-lsp: launch {signature.name} grid=cdiv({axis_var.get('x', sizes[0])}, 256) block=256"


def _size_cases(sizes: list[str], most_dims: int) -> str:
    if len(sizes) == 1 and most_dims <= 1:
        cases = [{sizes[0]: v} for v in ONE_D_SIZES]
    else:
        table = THREE_D_SIZES if most_dims >= 3 else MULTI_D_SIZES
        cases = [{s: vals[i % len(vals)] for i, s in enumerate(sizes)} for vals in table]
    return ", ".join("{" + ", ".join(f'"{k}": {v:_}' for k, v in c.items()) + "}" for c in cases)


def _text(plan: _Plan, launch_hints: list[str]) -> str:
    wanted = [n for n, a in plan.args.items() if a.kind in ("In", "InOut", "Scalar")]
    keywords = [n for n in wanted if keyword.iskeyword(n)]
    reference_params = [n for n in wanted if n not in keywords] + (["**args"] if keywords else [])
    keyword_note = (
        [f"    # {', '.join(f'args[{n!r}]' for n in keywords)}: named like Python keywords"]
        if keywords
        else []
    )
    outputs = [n for n, a in plan.args.items() if a.kind in ("Out", "InOut")]
    kinds = sorted({a.kind for a in plan.args.values()} | {"Spec"})
    title = " -> ".join(plan.pipeline) if len(plan.pipeline) > 1 else plan.kernel
    lines = [f'"""Spec for `{title}`: what it must compute (see docs/specs.md)."""', ""]
    if launch_hints:
        lines += [*launch_hints, ""]
    lines += [
        "import numpy as np",
        "",
        f"from kernel_lsp.spec import {', '.join(kinds)}",
        "",
        "",
        f"def reference({', '.join(reference_params)}):",
        f"    # numpy; fp16/bf16 inputs arrive as float32. Return {', '.join(outputs) or 'every output'} by name.",
        *keyword_note,
        '    raise NotImplementedError("write the numpy reference")',
        "",
        "",
        "SPEC = Spec(",
        f'    kernel="{plan.kernel}",',
    ]
    if len(plan.pipeline) > 1:
        lines.append(f"    pipeline=[{', '.join(_quote(k) for k in plan.pipeline)}],")
    if len(plan.sizes) > 1 or plan.most_dims > 1:
        lines.append("    # Small sizes to start with: raise them once the shapes below are right.")
    lines.append(f"    sizes=[{_size_cases(plan.sizes, plan.most_dims)}],")
    return "\n".join(lines + spec_args_and_end(plan.args, plan.sizes))


def spec_args_and_end(args: dict, sizes: Sequence[str]) -> list[str]:
    """A skeleton's `args={...}`, its reference and the end of the Spec: the lines every
    skeleton (kernel, pipeline, entry) ends with."""
    return [
        "    args={",
        *(arg.text(name) for name, arg in args.items()),
        "    },",
        "    reference=reference,",
        "    # work=lambda " + ", ".join(sizes) + ': {"bytes": ..., "flops": ...},',
        ")",
        "",
    ]


def _launch_notes(
    sigs: list[KernelSignature], directives: Directives | None, source: str, sizes: list[str]
) -> list[str]:
    """Comment lines for the top of the skeleton: each kernel's launch as the host code launches
    it, or the launch line the .cu needs (and why the host code's cannot be used)."""
    lines = []
    for sig in sigs:
        host = host_launch_of(sig, directives, source)
        if host is not None and host.directive is not None:
            d = host.directive
            smem = f" smem={d.smem}" if d.smem != "0" else ""
            others = f" (the first of {host.count} launches)" if host.count > 1 else ""
            lines += [
                f"# Launched as the .cu launches it: {d.origin}{others}: grid={d.grid} block={d.block}{smem}.",
                f"# A `// kernel-lsp: launch {sig.name} grid=... block=...` line in the .cu overrides it.",
            ]
        elif directives is not None and not directives.launches_of(sig.name):
            hint = _launch_hint(sig, kernel_body(source, sig) if source else "", sizes)
            why = f"# Its launch in host code cannot be used ({host.reason}), so the" if host else "# The"
            lines += [f"{why} .cu needs a launch line, e.g.:", f"#   {hint}"]
    return lines


def spec_skeleton(
    signature: KernelSignature, directives: Directives | None = None, source: str | None = None
) -> str:
    """The text of a spec file for the kernel `signature` of `source`."""
    source = source or ""
    plan = _plan(source, [signature], [signature.name], directives)
    return _text(plan, _launch_notes([signature], directives, source, plan.sizes))


def skeleton_for(source: str, kernels: list[str], path: str = "") -> str:
    """The skeleton of one kernel, or of a pipeline of several (their parameters share `args` by
    name), in `source`."""
    sigs = [s for s in (find_kernel(find_kernels(source), k) for k in dict.fromkeys(kernels)) if s]
    if not sigs:
        raise ValueError(f"no kernel {', '.join(kernels)} in {path or 'the source'}")
    directives = parse_directives(source)
    if len(sigs) == 1:
        return spec_skeleton(sigs[0], directives, source)
    plan = _plan(source, sigs, list(kernels), directives)
    return _text(plan, _launch_notes(sigs, directives, source, plan.sizes))


@dataclass(frozen=True)
class HostLaunchHint:
    """The launch a skeleton takes from the file's host code, or why it cannot."""

    directive: LaunchDirective | None
    symbols: tuple[str, ...] = ()
    count: int = 0
    reason: str = ""


def host_launch_of(
    signature: KernelSignature, directives: Directives | None, source: str | None
) -> HostLaunchHint | None:
    """The first launch of the kernel in the file's host code that reads over the kernel's
    parameters (None without a launch in host code, or with a launch comment)."""
    if not source or (directives is not None and directives.launches_of(signature.name)):
        return None
    launches = host_code(source).launches_of(signature.name)
    distinct = {
        (x.in_kernel_terms.grid.python(), x.in_kernel_terms.block.python())
        for x in launches
        if x.in_kernel_terms
    }
    for launch in launches:
        d = spec_launch(launch, signature.name)
        if d is not None and launch.in_kernel_terms is not None:
            t = launch.in_kernel_terms
            symbols = tuple(dict.fromkeys(t.grid.symbols + t.block.symbols + t.smem.symbols))
            return HostLaunchHint(d, symbols, len(distinct))
    if launches:
        first = launches[0]
        reasons = first.in_kernel_terms.reasons if first.in_kernel_terms else first.reasons
        return HostLaunchHint(None, reason=f"{first.where()}: {reasons[0] if reasons else 'unreadable'}")
    return None


def launcher_pipelines(source: str) -> list[tuple[str, list[str]]]:
    """(launcher, the kernels it launches in order, each once) for every host function of the
    file that launches more than one kernel: the pipelines a spec may describe whole."""
    return [(fn.name, list(dict.fromkeys(fn.kernels))) for fn in pipelines(host_code(source))]


def files_pipeline(source: str) -> list[str]:
    """The kernels of the file's one launcher that launches every kernel the file defines, in its
    order: a file whose kernels are one pipeline gets one spec for it; [] otherwise."""
    names = {k.name for k in find_kernels(source) if k.definition}
    found = [kernels for _, kernels in launcher_pipelines(source) if set(kernels) >= names]
    return found[0] if len(found) == 1 and len(names) > 1 else []
