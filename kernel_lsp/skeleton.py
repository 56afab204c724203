"""Spec skeletons: the text of a `X.spec.py` for a kernel that has none.

Shapes come from how the kernel indexes its buffers where that is plain to see (`c[i]` under
`i < n` is `n` elements; `a[row * K + k]` under `row < M` is `(M, K)`); a buffer whose shape cannot
be read gets the first size and a TODO. Sizes stay small when there is more than one size name,
so that no skeleton allocates more than a few MiB before the user has looked at it."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from .host_launch.occupancy import host_code
from .host_launch.spec_launch import spec_launch
from .source import Directives, KernelSignature, LaunchDirective, blank_comments
from .spec import c_type_dtype

_SIZE_LIKE = re.compile(r"^(n|m|k|len|size|count|num\w*|n\w*|rows|cols|width|height|batch|dim)$", re.I)
ONE_D_SIZES = (1, 1000, 1_000_003)
# Several size names: each case keeps every 2-D buffer under 256 × 256 elements.
MULTI_D_SIZES = ((1,), (33, 41, 49, 57), (256,))
_BOUND = re.compile(r"\b([A-Za-z_]\w*)\s*(<|<=|>=)\s*([A-Za-z_]\w*)\b")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def kernel_body(source: str, signature: KernelSignature) -> str:
    """The kernel's body, comments blanked; "" when it cannot be found (a declaration)."""
    code = blank_comments(source)
    lines = code.split("\n")
    if signature.line > len(lines):
        return ""
    start = sum(len(ln) + 1 for ln in lines[: signature.line - 1]) + signature.col - 1
    open_paren = code.find("(", start)
    depth, i = 0, open_paren
    while 0 <= i < len(code):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            break
        i += 1
    brace = code.find("{", i)
    if open_paren < 0 or brace < 0 or ";" in code[i:brace]:
        return ""
    depth = 0
    for j in range(brace, len(code)):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0:
            return code[brace + 1 : j]
    return code[brace + 1 :]


def _bounds(body: str, sizes: list[str]) -> dict[str, str]:
    """Index variable -> the size it is compared against (`i < n`, `row >= M`, `k < K`)."""
    bounds: dict[str, str] = {}
    for var, _, size in _BOUND.findall(body):
        if size in sizes and var not in sizes:
            bounds.setdefault(var, size)
    return bounds


def _index_expressions(body: str, name: str) -> list[str]:
    out = []
    for m in re.finditer(rf"\b{re.escape(name)}\s*\[", body):
        depth, j = 1, m.end()
        while j < len(body) and depth:
            depth += {"[": 1, "]": -1}.get(body[j], 0)
            j += 1
        out.append(" ".join(body[m.end() : j - 1].split()))
    return out


def _split_top(expr: str, sep: str) -> list[str]:
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == sep and depth == 0:
            parts.append(expr[start:i].strip())
            start = i + 1
    parts.append(expr[start:].strip())
    return parts


def infer_shape(expressions: list[str], sizes: list[str], bounds: dict[str, str]) -> tuple[str, ...] | None:
    """The shape an index reveals: `row * K + col` with `row < M` is (M, K); `i` with `i < n` is
    (n,). None when no index is that plain."""
    for expr in expressions:
        expr = expr.strip("() ")
        for term in _split_top(expr, "+"):
            factors = [f.strip("() ") for f in _split_top(term, "*")]
            if len(factors) == 2:
                a, b = factors
                if b in sizes and a in bounds:
                    return (bounds[a], b)
                if a in sizes and b in bounds:
                    return (bounds[b], a)
        if _IDENT.match(expr) and expr in bounds:
            return (bounds[expr],)
    return None


def _launch_hint(signature: KernelSignature, body: str, sizes: list[str], bounds: dict[str, str]) -> str:
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
        cases = [{s: vals[i % len(vals)] for i, s in enumerate(sizes)} for vals in MULTI_D_SIZES]
    return ", ".join("{" + ", ".join(f'"{k}": {v:_}' for k, v in c.items()) + "}" for c in cases)


def spec_skeleton(
    signature: KernelSignature, directives: Directives | None = None, source: str | None = None
) -> str:
    """The text of a spec file for `signature`: every parameter declared (const pointers as In,
    other pointers as Out, integer by-value parameters named like sizes as sizes), shapes read
    from `source`'s indexing where plain, a reference to fill in."""
    size_params = [
        p.name
        for p in signature.params
        if not p.is_pointer
        and (c_type_dtype(p.type) or "").startswith(("int", "uint"))
        and _SIZE_LIKE.match(p.name)
    ]
    host = host_launch_of(signature, directives, source)
    # Names the launch reads are sizes too: the kernel's integer parameters it uses, and launcher
    # parameters it reads that the kernel does not get (the spec must give those).
    for name in host.symbols if host else ():
        if name not in size_params:
            size_params.append(name)
    sizes = size_params or ["n"]
    body = kernel_body(source, signature) if source else ""
    # A parameter named like a Python keyword (`in`) cannot be a Python parameter: it arrives in
    # **args, which makes the reference get every input, scalar and size by name.
    wanted = [p.name for p in signature.params if p.is_const or not p.is_pointer]
    keywords = [n for n in wanted if keyword.iskeyword(n)]
    reference_params = [n for n in wanted if n not in keywords] + (["**args"] if keywords else [])
    keyword_note = (
        [f"    # {', '.join(f'args[{n!r}]' for n in keywords)}: named like Python keywords"]
        if keywords
        else []
    )
    bounds = _bounds(body, sizes)
    lines = [
        f'"""Spec for `{signature.name}`: what it must compute (see docs/specs.md)."""',
        "",
        "import numpy as np",
        "",
        "from kernel_lsp.spec import In, Out, Scalar, Spec",
        "",
        "",
        f"def reference({', '.join(reference_params)}):",
        "    # numpy; fp16/bf16 inputs arrive as float32. Return every output by name.",
        *keyword_note,
        '    raise NotImplementedError("write the numpy reference")',
        "",
        "",
        "SPEC = Spec(",
        f'    kernel="{signature.name}",',
    ]
    shapes = {
        p.name: infer_shape(_index_expressions(body, p.name), sizes, bounds)
        for p in signature.params
        if p.is_pointer
    }
    # A 2-D buffer at a 1-D size (1_000_003² elements) would be terabytes: small sizes then too.
    most_dims = max((len(dims) for dims in shapes.values() if dims), default=1)
    if len(sizes) > 1 or most_dims > 1:
        lines.append("    # Small sizes to start with: raise them once the shapes below are right.")
    lines += [f"    sizes=[{_size_cases(sizes, most_dims)}],", "    args={"]
    for p in signature.params:
        dtype = c_type_dtype(p.type) or "float32"
        notes = [] if c_type_dtype(p.type) else [f"TODO: element type of `{p.type}`"]
        if p.is_pointer:
            inferred = shapes[p.name]
            if inferred is None and len(sizes) > 1:
                notes.append("TODO: shape (not read from the kernel's indexing)")
            dims = inferred or (sizes[0],)
            shape = dims[0] if len(dims) == 1 else "(" + ", ".join(dims) + ")"
            kind = "In" if p.is_const else "Out"
            note = f"  # {'; '.join(notes)}" if notes else ""
            lines.append(f'        "{p.name}": {kind}("{dtype}", shape="{shape}"),{note}')
        elif p.name in sizes:
            lines.append(f'        "{p.name}": Scalar("{dtype}"),')
        else:
            lines.append(f'        "{p.name}": Scalar("{dtype}", 1),  # TODO: a value or size expression')
    lines += [
        "    },",
        "    reference=reference,",
        "    # work=lambda " + ", ".join(sizes) + ': {"bytes": ..., "flops": ...},',
        ")",
        "",
    ]
    if host is not None and host.directive is not None:
        d = host.directive
        smem = f" smem={d.smem}" if d.smem != "0" else ""
        others = f" (the first of {host.count} launches)" if host.count > 1 else ""
        lines.insert(
            1,
            f"# Launched as the .cu launches it: {d.origin}{others}: grid={d.grid} block={d.block}{smem}.\n"
            f"# A `// kernel-lsp: launch {signature.name} grid=... block=...` line in the .cu overrides it.",
        )
    elif directives is not None and not directives.launches_of(signature.name):
        hint = _launch_hint(signature, body, sizes, bounds)
        why = f"# Its launch in host code cannot be used ({host.reason}), so the" if host else "# The"
        lines.insert(1, f"{why} .cu needs a launch line, e.g.:\n#   {hint}")
    return "\n".join(lines)


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
