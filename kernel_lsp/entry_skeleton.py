"""Spec skeletons for host entries (`Spec(entry=...)`): the text of a `X.spec.py` for a launcher
(an `extern "C"` function, or any host function that launches kernels), for `kernel-lsp spec`.

The launcher's parameters are the spec's `args`, by name. What each one is comes from what the
launcher does with it and what its kernels do with what it passes them:

- a pointer passed to kernels is read or written as they do, in launch order (read by the first
  kernel that touches it and written by a later one: `InOut`; written first: `Out`, even when a
  later kernel reads it back; zeroed by the launcher's `cudaMemset` first: `Out`);
- a host pointer copied into a device buffer (`cudaMemcpy(d_in, in, ...)`) is `In`, one the
  result is copied back into is `Out`; its shape is the kernels' shape of the device buffer, else
  the copy's byte count over its element size;
- shapes are the kernels' (kernel_use.py, through skeleton.py), with each kernel parameter
  replaced by what the launcher passes for it (`n` passed `rows * cols` is `rows * cols`), and an
  index the kernel leaves unbounded (`row = blockIdx.x`) bounded by the launch's grid;
- an integer parameter that a shape, a grid, an allocation or a copy reads is a size; a float gets
  a value to test with, distinct from the others (two bounds of an integral must differ);
- the launcher's own guards (`if (cols % 2 != 0) return;`, `assert(n <= MAX)`) become
  `sizes_valid`, so that no case (edge sizes included) asks for what it refuses.

Guesses are marked `TODO(kernel-lsp)` as in kernel skeletons; the reference raises
`NotImplementedError` until it is written."""

from __future__ import annotations

import itertools
import keyword
import re
from dataclasses import dataclass

from .constants.cexpr import Binary, Expr, Unary, parse, to_python
from .host_entry import entry_abi, find_host_function
from .host_launch import argument_root
from .host_launch.launcher import entry_kernels
from .host_launch.model import Guard, HostCall, HostFunction, HostLaunch
from .host_launch.occupancy import host_code
from .index_expr import divide, parse_index, poly_text
from .kernel_use import kernel_body
from .lexer import blank_comments, matching, parenthesized, split_top
from .safe_expr import ExprError, safe_eval
from .skeleton import _SIZE_LIKE, FLOAT_VALUES, ONE_D_SIZES, _Arg, _Plan, _plan, _quote, spec_args_and_end
from .source import KernelSignature, find_kernel, find_kernels, parse_directives
from .spec import DTYPES
from .spec.loading import SKELETON_TODO

_COPY = ("cudaMemcpy", "cudaMemcpyAsync")
_EPSILON = re.compile(r"eps|epsilon", re.I)
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b(?!\s*\()")
MULTI = ((1,), (33, 41, 49, 57), (256,))
THREE = ((1,), (5, 7, 9, 11), (64,))


def launcher_entries(source: str) -> list[str]:
    """Host functions of the file a spec may name as its entry: those that launch kernels
    (themselves or through helpers they call) and cross the C ABI (pointers, integers, floats),
    `extern "C"` ones first; never `main`, nor a helper another of them calls (unless it is
    `extern "C"` itself)."""
    host = host_code(source)
    functions = [f for f in host.functions if not f.is_kernel and f.name != "main"]
    launching = {f.name for f in functions if f.launches}
    for _ in range(2):  # through helpers, two calls deep
        launching |= {
            f.name for f in functions if any(_calls(source, f, n) for n in launching if n != f.name)
        }
    found = []
    for f in functions:
        if f.name not in launching or "__device__" in f.qualifiers:
            continue
        sig = find_host_function(source, f.name)
        if sig is None or not sig.definition or entry_abi(sig).problems:
            continue
        found.append(f)
    called = {g.name for f in found for g in found if g is not f and _calls(source, f, g.name)}
    ordered = sorted(found, key=lambda f: (not f.extern_c, f.line))
    return list(dict.fromkeys(f.name for f in ordered if f.name not in called or f.extern_c))


def _body(source: str, fn: HostFunction) -> str:
    code = blank_comments(source)
    lines = code.split("\n")
    start = sum(len(ln) + 1 for ln in lines[: fn.line - 1]) + fn.col - 1
    open_ = code.find("{", start)
    if open_ < 0:
        return ""
    close = matching(code, open_)
    return code[open_ + 1 : close if close >= 0 else len(code)]


def _calls(source: str, fn: HostFunction, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\s*(?:<[^<>;]*>)?\s*\(", _body(source, fn)) is not None


# --- the launcher's buffers ------------------------------------------------------------------------


def _copies(fn: HostFunction, param: str) -> tuple[list[HostCall], list[HostCall]]:
    """(copies from `param` into a device buffer, copies from a device buffer into `param`)."""
    into, out = [], []
    for c in fn.calls:
        if c.name not in _COPY or len(c.args) < 3:
            continue
        dst, src = _root(c.args[0]), _root(c.args[1])
        if src == param and dst != param:
            into.append(c)
        elif dst == param and src != param:
            out.append(c)
    return into, out


def _root(text: str) -> str:
    return argument_root(text)


def _elements(q, dtype: str) -> str:
    """A byte count (a Quantity over the launcher's parameters) as an element count, or ""."""
    if q is None or not q.resolved:
        return ""
    text = q.python()
    total = parse_index(text.replace("//", "/")) if text else None
    itemsize = DTYPES[dtype].itemsize if dtype in DTYPES else 0
    if not itemsize or total is None or any(c % itemsize for c in total.values()):
        return ""
    return poly_text({m: c // itemsize for m, c in total.items()})


def _substitute(text: str, mapping: dict[str, str]) -> str:
    """`text` (a shape or size expression over a kernel's names) over the launcher's names."""

    def one(m: re.Match[str]) -> str:
        value = mapping.get(m.group(1))
        if value is None:
            return m.group(0)
        return value if re.fullmatch(r"[\w.]+", value) else f"({value})"

    return _tidy(_NAME.sub(one, text))


def _rename_dist(dist: str, mapping: dict[str, str]) -> str:
    """A kernel skeleton's distribution over the launcher's names, or "" where a size it names is
    an expression there (a lambda's parameter must be a name)."""
    names = set(_NAME.findall(dist))
    renames = {n: mapping[n] for n in names if n in mapping and mapping[n] != n}
    if any(not re.fullmatch(r"[A-Za-z_]\w*", v) for v in renames.values()):
        return ""
    return _NAME.sub(lambda m: renames.get(m.group(1), m.group(1)), dist)


def _tidy(shape: str) -> str:
    """`((B * T), C)` -> `(B * T, C)`, `(B * T)` -> `B * T`: parentheses around a whole dimension."""

    def bare(dim: str) -> str:
        dim = dim.strip()
        while parenthesized(dim):
            dim = dim[1:-1].strip()
        return dim

    if parenthesized(shape):
        dims = split_top(shape[1:-1])
        if len(dims) > 1:
            return "(" + ", ".join(bare(d) for d in dims) + ")"
    return bare(shape)


def _names(text: str) -> list[str]:
    return [n for n in _NAME.findall(text) if n not in ("cdiv", "min", "max", "round_up")]


# --- the grid bounds an open index -----------------------------------------------------------------


def _axis_extent(body: str, var: str, launch: HostLaunch) -> str:
    """How far `var` runs under the launch's grid (`row = blockIdx.x` under grid `rows`: rows;
    `col = blockIdx.x * blockDim.x + threadIdx.x` under grid cdiv(n, 256) and block 256: n), or ""."""
    rhs = var
    if not var.startswith(("blockIdx", "threadIdx")):
        m = re.search(rf"\b{re.escape(var)}\s*=(?!=)\s*([^;]+);", body)
        if not m:
            return ""
        rhs = m.group(1)
    rhs = " ".join(rhs.replace("(", " ").replace(")", " ").split())
    grid = launch.grid.python()
    block = launch.block.python()
    if grid is None or block is None:
        return ""
    gdims = _dims(grid)
    bdims = _dims(block)
    m = re.fullmatch(r"blockIdx\.([xyz])", rhs)
    if m:
        return gdims["xyz".index(m.group(1))]
    m = re.fullmatch(
        r"blockIdx\.([xyz]) \* blockDim\.\1 \+ threadIdx\.\1|threadIdx\.([xyz]) \+ blockIdx\.\2 \* blockDim\.\2|"
        r"blockDim\.([xyz]) \* blockIdx\.\3 \+ threadIdx\.\3",
        rhs,
    )
    if m:
        axis = "xyz".index(next(g for g in m.groups() if g))
        g, b = gdims[axis], bdims[axis]
        c = re.fullmatch(r"cdiv\((.+), (\d+)\)", g)
        if c and c.group(2) == b:
            return c.group(1)
        return f"{g} * {b}" if b != "1" else g
    return ""


def _dims(text: str) -> list[str]:
    parts = split_top(text[1:-1]) if parenthesized(text) else [text]
    return ([*parts, "1", "1", "1"])[:3]


# --- guards ------------------------------------------------------------------------------------------


def _negate(e: Expr) -> str:
    """The C condition `e` negated, in Python: `cols % 2 != 0` -> `cols % 2 == 0`."""
    flip = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}
    if isinstance(e, Binary) and e.op in flip:
        return to_python(Binary(flip[e.op], e.left, e.right))
    if isinstance(e, Binary) and e.op == "||":
        return f"{_paren(_negate(e.left))} and {_paren(_negate(e.right))}"
    if isinstance(e, Unary) and e.op == "!":
        return to_python(e.operand)
    return f"not ({to_python(e)})"


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+|[\w. %*+-]+ [<>=!]=? [\w. %*+()-]+", text) else f"({text})"


def _valid(guards: tuple[Guard, ...], sizes: list[str]) -> list[str]:
    """The guards that refuse some positive sizes, each as the condition a case must meet."""
    out = []
    for g in guards:
        text = g.condition.python()
        if not g.condition.resolved or not text:
            continue
        names = set(_names(text))
        if not names or not names <= set(sizes):
            continue  # a null pointer check, or what the spec's sizes do not name
        if not any(_true(text, case) for case in _probe_cases(sorted(names))):
            continue  # `n <= 0`: no case of positive sizes meets it
        parsed = parse(re.sub(r"\bnot\b", "!", text).replace(" and ", " && ").replace(" or ", " || "))
        out.append(_negate(parsed) if parsed is not None else f"not ({text})")
    return out


def _probe_cases(names: list[str]) -> list[dict[str, int]]:
    """Positive sizes to try a guard with: every combination of a few values for up to three
    names (`k > n` needs k and n apart), the same value for all of them beyond."""
    values = (1, 2, 3, 7, 97, 1000, 1 << 20, 1 << 24)
    if len(names) > 3:
        return [dict.fromkeys(names, v) for v in values]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(values, repeat=len(names))]


def _true(text: str, values: dict[str, int]) -> bool:
    try:
        return bool(safe_eval(text, values))
    except ExprError:
        return False


def _cases(sizes: list[str], most_dims: int, valid: list[str]) -> list[dict[str, int]]:
    """Small cases (as kernel skeletons choose them), each moved to the nearest sizes the
    launcher accepts; a case none fits is left out."""
    if len(sizes) == 1 and most_dims <= 1:
        cases = [{sizes[0]: v} for v in ONE_D_SIZES]
    else:
        table = THREE if most_dims >= 3 else MULTI
        cases = [{s: vals[i % len(vals)] for i, s in enumerate(sizes)} for vals in table]
    out = []
    for case in cases:
        fitted = _fit(case, valid)
        if fitted is not None and fitted not in out:
            out.append(fitted)
    return out


def _fit(case: dict[str, int], valid: list[str]) -> dict[str, int] | None:
    def ok(c: dict[str, int]) -> bool:
        return all(_true(v, c) for v in valid)

    if ok(case):
        return case
    for step in range(1, 65):
        for name in case:
            for v in (case[name] + step, case[name] - step):
                if v >= 1 and ok({**case, name: v}):
                    return {**case, name: v}
    for name in case:  # the largest that fits, for limits (`n <= MAX`)
        lo = 1
        while lo < case[name] and ok({**case, name: lo * 2}):
            lo *= 2
        if ok({**case, name: lo}):
            return {**case, name: lo}
    return None


# --- the skeleton ---------------------------------------------------------------------------------


@dataclass
class EntryPlan:
    entry: str
    kernels: list[str]
    args: dict[str, _Arg]
    sizes: list[str]
    valid: list[str]
    most_dims: int
    notes: list[str]


def plan_entry(source: str, entry: str) -> EntryPlan | None:
    """What the skeleton of `entry` says, or None when the file does not define it."""
    sig = find_host_function(source, entry)
    host = host_code(source)
    fn = host.function(entry)
    if sig is None or not sig.definition or fn is None:
        return None
    abi = entry_abi(sig)
    directives = parse_directives(source)
    all_kernels = find_kernels(source)
    notes: list[str] = []
    launches = list(fn.launches)
    if not launches:
        names = entry_kernels(source, entry)
        notes.append(
            f"`{entry}` launches no kernel itself"
            + (f" (its helpers launch {', '.join(names)})" if names else "")
            + ": the shapes below come from its own calls only"
        )
    plans: dict[int, _Plan] = {}
    sigs: dict[int, KernelSignature] = {}
    for i, x in enumerate(launches):
        ks = find_kernel(all_kernels, x.kernel)
        if ks is None:
            continue
        sigs[i] = ks
        try:
            plans[i] = _plan(source, [ks], [ks.name], directives, fn)
        except Exception:  # a body the reader cannot follow: that kernel says nothing
            continue

    # Kernel names -> the launcher's, per launch: scalars by what is passed, open indices by the
    # launch's grid, buffers by the launcher variable passed.
    def mapping(i: int) -> dict[str, str]:
        x = launches[i]
        out: dict[str, str] = {}
        for a in x.arguments:
            if a.param and a.value is not None and a.value.resolved:
                text = a.value.python()
                if text:
                    out[a.param] = text
        plan = plans.get(i)
        if plan is not None and i in sigs:
            body = kernel_body(source, sigs[i])
            for invented, var in plan.open_vars.items():
                extent = _axis_extent(body, var, x)
                if extent:
                    out[invented] = extent
        return out

    maps = {i: mapping(i) for i in plans}
    params = [a for a in abi.args if a.code != "stream"]
    int_params = {
        a.name for a in params if a.code not in ("ptr",) and (a.dtype or "").startswith(("int", "uint"))
    }
    args: dict[str, _Arg] = {}
    size_uses: set[str] = set()
    most_dims = 1

    for a in params:
        if a.code != "ptr":
            continue
        into, out_copies = _copies(fn, a.name)
        device = {a.name} | {_root(c.args[0]) for c in into} | {_root(c.args[1]) for c in out_copies}
        uses = [
            (i, x, arg.param)
            for i, x in enumerate(launches)
            for arg in x.arguments
            if arg.source in device and arg.param
        ]
        dtype = a.dtype or ""
        found = (plans[i].args.get(p) for i, _, p in uses if i in plans)
        kernel_args = [k for k in found if k is not None]
        if not dtype:
            dtype = next((k.dtype for k in kernel_args if k.kind != "Scalar"), "float32")
        notes_here: list[str] = []
        # The kind: copies say it for host pointers; kernels in launch order for device ones.
        kinds = [k.kind for k in kernel_args if k.kind in ("In", "Out", "InOut", "Scratch")]
        first_use = min((x.line for _, x, _ in uses), default=10**9)
        zeroed = any(
            c.target in device and c.line < first_use and len(c.args) > 1 and c.args[1].strip() == "0"
            for c in fn.memsets
        )
        if into or out_copies:
            kind = "InOut" if into and out_copies else ("Out" if out_copies else "In")
        elif not kinds:
            kind = "In"
            notes_here.append("kind (no kernel of the launcher reads or writes it)")
        elif zeroed or kinds[0] == "Out" or kinds[0] == "Scratch":
            kind = "Out" if any(k != "In" for k in kinds) else "In"
        elif kinds[0] == "In":
            kind = "InOut" if any(k in ("Out", "InOut") for k in kinds[1:]) else "In"
        else:
            kind = "InOut"
        if "const" in a.c_type.split("*")[0]:
            kind = "In"
        arg = _Arg(kind, dtype, notes=notes_here)
        if kind == "InOut" and not zeroed and any(k.dist == '"zeros"' for k in kernel_args):
            arg.dist = '"zeros"'
        elif kind in ("In", "InOut"):
            # Values that must fit the sizes (CSR offsets, indices below a table's rows), renamed
            # to the launcher's sizes where each is one of them.
            for i, _, p in uses:
                karg = plans[i].args.get(p) if i in plans else None
                if karg is not None and karg.dist.startswith("lambda"):
                    arg.dist = _rename_dist(karg.dist, maps.get(i, {}))
                    break
        # The shape: the kernels' (over the launcher's names), else the copy's element count.
        shape = ""
        guessed = True
        for i, _, p in uses:
            k = plans.get(i)
            karg = k.args.get(p) if k else None
            if karg is None or not karg.shape or karg.kind in ("Scalar", "Alias"):
                continue
            text = _substitute(karg.shape, maps.get(i, {}))
            left = [n for n in _names(text) if n not in int_params]
            sure = not any("shape" in n for n in karg.notes) and not left
            if sure or not shape:
                shape, guessed = text, not sure
            if sure:
                break
        copied = next(
            (_elements(c.bytes, dtype) for c in [*into, *out_copies] if _elements(c.bytes, dtype)), ""
        )
        if copied and (not shape or guessed):
            shape, guessed = _fold(copied, shape), False
        if not shape:
            shape = next(iter(sorted(int_params)), "n")
            arg.notes.append("shape (not read from the launcher or its kernels)")
        elif guessed:
            arg.notes.append("shape (a size the kernels do not bound is a guess)")
        arg.shape = shape
        size_uses |= set(_names(shape))
        most_dims = max(most_dims, shape.count(",") + 1 if shape.startswith("(") else 1)
        args[a.name] = arg

    # Integers the launch or the launcher's allocations read are sizes too.
    for x in launches:
        for q in (x.grid, x.block, x.smem):
            size_uses |= set(q.symbols)
        for argument in x.arguments:
            if argument.value is not None and argument.value.resolved and argument.param:
                for i, plan in plans.items():
                    if launches[i] is x and argument.param in plan.sizes:
                        size_uses |= set(argument.value.symbols)
    for c in fn.calls:
        if c.bytes is not None:
            size_uses |= set(c.bytes.symbols)

    # A size the kernels leave open (`table_rows` for `table[idx[i] * d + k]`) and the one integer
    # parameter nothing else reads (`vocab`): the launcher's caller gives it, so it is that one.
    invented = list(
        dict.fromkeys(n for arg in args.values() for n in _names(arg.shape) if n not in int_params)
    )
    shaped = {n for arg in args.values() for n in _names(arg.shape)}
    unused = [
        a.name for a in params if a.name in int_params and a.name not in size_uses and a.name not in shaped
    ]
    if len(invented) == 1 and len(unused) == 1:
        pattern = re.compile(rf"\b{re.escape(invented[0])}\b")
        for arg in args.values():
            arg.shape = pattern.sub(unused[0], arg.shape)
            arg.dist = pattern.sub(unused[0], arg.dist)
        size_uses.add(unused[0])

    floats = 0
    scalars: dict[str, _Arg] = {}
    for a in params:
        if a.code == "ptr":
            continue
        dtype = a.dtype or "int32"
        if a.name in int_params:
            if a.name in size_uses or _SIZE_LIKE.match(a.name):
                scalars[a.name] = _Arg("Scalar", dtype)
            else:
                scalars[a.name] = _Arg("Scalar", dtype, value="1", notes=["a value or size expression"])
        else:
            value = "1e-5" if _EPSILON.search(a.name) else FLOAT_VALUES[floats % len(FLOAT_VALUES)]
            floats += 0 if _EPSILON.search(a.name) else 1
            scalars[a.name] = _Arg("Scalar", dtype, value=value)
    ordered = {a.name: args.get(a.name) or scalars[a.name] for a in params}
    sizes = [a.name for a in params if a.name in scalars and not scalars[a.name].value]
    invented = [
        n for arg in args.values() for n in _names(arg.shape) if n not in sizes and n not in int_params
    ]
    sizes += list(dict.fromkeys(invented))
    if not sizes:
        sizes = ["n"]
    valid = _valid(fn.guards, sizes)
    kernels = list(dict.fromkeys(x.kernel for x in launches)) or entry_kernels(source, entry)
    return EntryPlan(entry, kernels, ordered, sizes, valid, most_dims, notes)


def _fold(copied: str, shape: str) -> str:
    """A copy's element count, shaped like the kernels' guess where its known inner dimensions
    divide it (`rows * cols` with a guess `(num_rows, cols)` is `(rows, cols)`)."""
    if not shape.startswith("("):
        return copied
    dims = split_top(shape[1:-1])
    total = parse_index(copied)
    inner = parse_index(" * ".join(f"({d})" for d in dims[1:])) if dims[1:] else None
    if total is None or inner is None:
        return copied
    outer = divide(total, inner)
    if outer is None:
        return copied
    return "(" + ", ".join([poly_text(outer), *dims[1:]]) + ")"


def entry_skeleton(source: str, entry: str) -> str:
    """The text of a spec file for the host entry `entry` of `source` (ValueError: no such
    function with a body)."""
    plan = plan_entry(source, entry)
    if plan is None:
        raise ValueError(f"no host function `{entry}` with a body")
    return _text(plan)


def _text(plan: EntryPlan) -> str:
    wanted = [n for n, a in plan.args.items() if a.kind in ("In", "InOut", "Scalar")]
    keywords = [n for n in wanted if keyword.iskeyword(n)]
    reference_params = [n for n in wanted if n not in keywords] + (["**args"] if keywords else [])
    outputs = [n for n, a in plan.args.items() if a.kind in ("Out", "InOut")]
    helpers = {h for v in plan.valid for h in re.findall(r"\b(cdiv|round_up)\(", v)}
    kinds = sorted({a.kind for a in plan.args.values()} | {"Spec"}) + sorted(helpers)
    lines = [f'"""Spec for the entry `{plan.entry}`: what it must compute (see docs/specs.md)."""', ""]
    launched = " -> ".join(plan.kernels) or "no kernel kernel-lsp can see"
    lines += [
        f"# `{plan.entry}` is called with device buffers and these scalars; it launches {launched}.",
        *[f"# {SKELETON_TODO}: {n}" for n in plan.notes],
        "",
        "import numpy as np",
        "",
        f"from kernel_lsp.spec import {', '.join(kinds)}",
        "",
        "",
        f"def reference({', '.join(reference_params)}):",
        f"    # numpy; fp16/bf16 inputs arrive as float32. Return {', '.join(outputs) or 'every output'} by name.",
    ]
    if keywords:
        lines.append(f"    # {', '.join(f'args[{n!r}]' for n in keywords)}: named like Python keywords")
    lines += [
        '    raise NotImplementedError("write the numpy reference")',
        "",
        "",
        "SPEC = Spec(",
        f"    entry={_quote(plan.entry)},",
    ]
    cases = _cases(plan.sizes, plan.most_dims, plan.valid)
    if len(plan.sizes) > 1 or plan.most_dims > 1:
        lines.append("    # Small sizes to start with: raise them once the shapes below are right.")
    shown = ", ".join("{" + ", ".join(f'"{k}": {v:_}' for k, v in c.items()) + "}" for c in cases)
    lines.append(f"    sizes=[{shown}],")
    if plan.valid:
        used = [s for s in plan.sizes if any(s in _names(v) for v in plan.valid)]
        lines.append(
            "    # The launcher refuses other sizes (its guards): no case, edge sizes included, asks for them."
        )
        lines.append(
            f"    sizes_valid=lambda {', '.join(used)}: {' and '.join(_paren(v) for v in plan.valid)},"
        )
    return "\n".join(lines + spec_args_and_end(plan.args, plan.sizes))
