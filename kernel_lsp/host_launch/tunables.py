"""Constants a launcher holds, for the tuner: what sets the block size of a kernel's launches
(`#define BLOCK_SIZE 256`, `constexpr int threadsPerBlock = 256;`, `int threads = 256;` in the
launcher, `dim3 block(16, 16)`), what caps or sets its grid (`#define NUM_BLOCKS 128`, `min(cdiv(n,
256), MAX_BLOCKS)`), the template arguments of launched kernels (`k<4><<<...>>>`, `k<VEC>`), and
tile constants its kernels read (`#define TILE 32` in `__shared__ float t[TILE][TILE + 1]`). A
constant counts when changing it changes a launch of the kernel (the file is read again with the
value doubled: its block, its grid, its template arguments) or when a launched kernel's body reads
it, so only constants the launches really use are offered; a tuner candidate rewrites the
constant's value in place. `nothing_to_tune` says why a file has none."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..compile.artifact import literal_launch_value
from ..constants import read_constants, without_preprocessor
from ..lexer import blank_comments, matching, split_top, top_level_spans
from ..source import parse_directives
from .launches import parse_host
from .model import launch_matches
from .scan import bindings, find_functions, statements

_LITERAL = re.compile(r"^\(?\s*(\d+)[uUlL]*\s*\)?$")
# The key of a launch's literal block (`k<<<cdiv, 128>>>`), as optimizer.tunables names it.
LAUNCH_LITERAL = "launch.block"
# The name of a template argument written at a launch (`tmpl.k.0@12`: the first of `k<...>` at line 12).
TEMPLATE = "tmpl"
MIN_THREADS, MAX_THREADS = 32, 1024


@dataclass(frozen=True)
class BlockConstant:
    """An integer literal a launch's block size is made of."""

    key: str  # the tuner's name: the macro's name, `threadsPerBlock@7`, `block.x@57`
    name: str
    line: int  # 1-based
    value: int
    arg: int | None = None  # which argument of `dim3 block(16, 16)`; None for `name = value`
    macro: bool = False
    choices: tuple[int, ...] = ()  # values that keep the block between 32 and 1024 threads
    role: str = "block"  # block | grid | template | tile: what changing it changes


def _sites(source: str, kernels: Sequence[str]) -> list[BlockConstant]:
    """Every integer literal that could set a block: macros, file-scope constants, and the
    literal declarations of the functions that launch `kernels`."""
    constants = read_constants(source)
    host = parse_host(source)
    mine = [x for x in host.launches if any(launch_matches(x, k) for k in kernels)]
    launchers = {x.function for x in mine}
    code = without_preprocessor(blank_comments(source))
    spans = [s for s in find_functions(code, source) if s.name.rpartition("::")[2] in launchers]
    # Constants the launches can read: named in the launchers' bodies or the launch comments, or
    # in a macro named there.
    comments = [d for k in kernels for d in parse_directives(source).launches_of(k)]
    # The launched kernels' bodies too: a tile or an items-per-thread constant they read.
    bodies = _kernel_bodies(source, kernels)
    used = " ".join(
        [code[s.open : s.close] for s in spans]
        + [f"{d.grid} {d.block} {d.smem}" for d in comments]
        + [bodies]
    )
    used += " ".join(text for name, text in constants.raw.items() if re.search(rf"\b{name}\b", used))
    out = []
    for name, text in constants.raw.items():
        m = _LITERAL.match(text.strip())
        if m and constants.kinds[name] != "-D" and re.search(rf"\b{name}\b", used):
            macro = constants.kinds[name] == "macro"
            key = name if macro else f"{name}@{constants.lines[name]}"
            out.append(BlockConstant(key, name, constants.lines[name], int(m.group(1)), macro=macro))
    for x in mine:
        # `k<4, 256><<<...>>>`: an integer template argument written at the launch.
        head, lt, rest = x.written.partition("<")
        for i, arg in enumerate(split_top(rest.rsplit(">", 1)[0]) if lt else []):
            m = _LITERAL.match(arg)
            if m and int(m.group(1)) > 1:
                key = f"{TEMPLATE}.{head.strip().rpartition('::')[2]}.{i}@{x.line}"
                out.append(BlockConstant(key, TEMPLATE, x.line, int(m.group(1)), i, role="template"))
        # `k<<<(n + 127) / 128, 128>>>`: the literal block and the grid that repeats it.
        if (
            x.kind == "<<<>>>"
            and _LITERAL.match(x.block.text)
            and re.search(rf"\b{x.block.text}\b", x.grid.text)
        ):
            out.append(BlockConstant(f"{LAUNCH_LITERAL}@{x.line}", LAUNCH_LITERAL, x.line, int(x.block.text)))
    for span in spans:
        for name, binds in bindings(statements(code, span.open, span.close)).items():
            for b in binds:
                if b.kind != "decl":
                    continue
                line = source.count("\n", 0, b.offset) + 1
                if b.dim3:
                    inner = b.init_text.strip()
                    parts = split_top(inner[1:-1]) if inner[:1] in "({" else split_top(inner)
                    for i, part in enumerate(parts[:3]):
                        m = _LITERAL.match(part)
                        if m and int(m.group(1)) > 1:  # a 1 says the dimension is not used
                            out.append(
                                BlockConstant(f"{name}.{'xyz'[i]}@{line}", name, line, int(m.group(1)), i)
                            )
                else:
                    m = _LITERAL.match(b.init_text.strip())
                    if m and int(m.group(1)) > 1:
                        out.append(BlockConstant(f"{name}@{line}", name, line, int(m.group(1))))
    return out


def set_constant(source: str, site: BlockConstant, value: int | str) -> str:
    """`source` with the literal of `site` replaced by `value` (unchanged where it is not found)."""
    lines = source.splitlines(keepends=True)
    if not 0 < site.line <= len(lines):
        return source
    text = lines[site.line - 1]
    name = re.escape(site.name)
    if site.name == LAUNCH_LITERAL:
        new = _set_launch_literal(text, site.value, int(value))
    elif site.name == TEMPLATE:
        new = _set_template_argument(text, site.key, str(value))
    elif site.macro:
        new = re.sub(rf"(#\s*define\s+{name}\s+\(?\s*)\d+", rf"\g<1>{value}", text, count=1)
    elif site.arg is None:
        new = re.sub(rf"(\b{name}\s*(?:=\s*|\(\s*|\{{\s*)\(?\s*)\d+", rf"\g<1>{value}", text, count=1)
    else:
        new = _set_argument(text, site.name, site.arg, str(value))
    lines[site.line - 1] = new
    return "".join(lines)


def _set_launch_literal(text: str, old: int, new: int) -> str:
    """`<<<(n + 127) / 128, 128>>>` with 128 -> 256: `<<<(n + 255) / 256, 256>>>`."""
    start, end = text.find("<<<"), text.find(">>>")
    if start < 0 or end < start:
        return text
    inner = re.sub(rf"\b{old - 1}\b", str(new - 1), text[start:end]) if old > 1 else text[start:end]
    inner = re.sub(rf"\b{old}\b", str(new), inner)
    return text[:start] + inner + text[end:]


def _set_template_argument(text: str, key: str, value: str) -> str:
    """`k<4, 256><<<` with the template argument the key names set to `value`."""
    m = _TEMPLATE_KEY.match(key)
    if not m:
        return text
    kernel, index = m.group("kernel"), int(m.group("index"))
    found = re.search(rf"\b{re.escape(kernel)}\s*<", text)
    if not found:
        return text
    return _set_literal_argument(text, found.end() - 1, index, value)


def _set_argument(text: str, name: str, index: int, value: str) -> str:
    m = re.search(rf"\b{re.escape(name)}\s*(?:=\s*dim3\s*)?([({{])", text)
    if not m:
        return text
    return _set_literal_argument(text, m.start(1), index, value)


def _set_literal_argument(text: str, open_: int, index: int, value: str) -> str:
    """`text` with the number of the `index`-th argument in the brackets at `open_` set to
    `value` (unchanged unless that argument is a plain number)."""
    close = matching(text, open_)
    if close < 0:
        return text
    spans = top_level_spans(text, ",", open_ + 1, close)
    if index >= len(spans):
        return text
    start, end = spans[index]
    if not _LITERAL.match(text[start:end].strip()):
        return text
    return text[:start] + re.sub(r"\d+[uUlL]*", value, text[start:end], count=1) + text[end:]


def block_totals(source: str, kernels: Sequence[str], defines: Sequence[str] = ()) -> list[int | None]:
    """The threads per block of each launch of `kernels`: launch comments, else host code."""
    directives = parse_directives(source)
    out: list[int | None] = []
    host = None
    for kernel in kernels:
        comments = directives.launches_of(kernel)
        if comments:
            for d in comments:
                v = literal_launch_value(d.block, tuple(defines), source)
                out.append(math.prod(v) if isinstance(v, tuple) else v)
            continue
        host = host or parse_host(source, defines)
        out += [x.block.total for x in host.launches_of(kernel)]
    return out


def block_constants(source: str, kernels: Sequence[str], defines: Sequence[str] = ()) -> list[BlockConstant]:
    """The constants that set the block of a launch of `kernels`, each with the values to try."""
    before = block_totals(source, kernels, defines)
    if not any(before):
        return []
    found = []
    for site in _sites(source, kernels):
        after = block_totals(set_constant(source, site, site.value * 2), kernels, defines)
        changed = [(a, b) for a, b in zip(before, after, strict=False) if a and b and a != b]
        if not changed:
            continue
        total, doubled = changed[0]
        power = round(math.log2(doubled / total))  # 1: the block's x; 2: a square tile's side
        if power < 1:
            continue
        # Powers of two times the current value (halving only while it divides evenly).
        values = {site.value << k for k in range(7)} | {
            site.value >> k for k in range(1, 7) if site.value % (1 << k) == 0
        }
        choices = sorted(
            {site.value}
            | {v for v in values if MIN_THREADS <= total * (v / site.value) ** power <= MAX_THREADS}
        )
        if len(choices) > 1:
            found.append(
                BlockConstant(
                    site.key, site.name, site.line, site.value, site.arg, site.macro, tuple(choices)
                )
            )
    return found


_KEY = re.compile(r"^(?P<name>launch\.block|[A-Za-z_]\w*)(?:\.(?P<axis>[xyz]))?@(?P<line>\d+)$")
_TEMPLATE_KEY = re.compile(r"^tmpl\.(?P<kernel>[A-Za-z_]\w*)\.(?P<index>\d+)@(?P<line>\d+)$")


def is_constant_key(key: str) -> bool:
    """Whether a tuner parameter names a constant in code (`threads@12`, `tmpl.k.0@30`), not a macro."""
    return _KEY.match(key) is not None or _TEMPLATE_KEY.match(key) is not None


def site_of(key: str, source: str = "") -> BlockConstant | None:
    t = _TEMPLATE_KEY.match(key)
    if t:
        return BlockConstant(key, TEMPLATE, int(t.group("line")), 0, int(t.group("index")), role="template")
    m = _KEY.match(key)
    if not m:
        return None
    arg = "xyz".index(m.group("axis")) if m.group("axis") else None
    site = BlockConstant(key, m.group("name"), int(m.group("line")), 0, arg)
    if site.name == LAUNCH_LITERAL:  # its value is the launch's block as written
        found = (
            next((x for x in parse_host(source).launches if x.line == site.line), None) if source else None
        )
        value = int(found.block.text) if found and _LITERAL.match(found.block.text) else 0
        site = BlockConstant(key, site.name, site.line, value)
    return site


def current_value(source: str, key: str) -> str | None:
    """The literal a constant key has in `source`."""
    site = site_of(key, source)
    if site is None:
        return None
    if site.name == LAUNCH_LITERAL:
        return str(site.value) if site.value else None
    if site.name == TEMPLATE:
        lines = source.splitlines()
        if not 0 < site.line <= len(lines):
            return None
        changed = _set_template_argument(lines[site.line - 1], key, "918273645")
        at = changed.find("918273645")
        m = re.match(r"\d+", lines[site.line - 1][at:]) if at >= 0 else None
        return m.group(0) if m else None
    marker = "918273645"  # found where the value is by setting it to a number no file has
    changed = set_constant(source, site, marker)
    if changed == source:
        return None
    line = source.splitlines()[site.line - 1]
    at = changed.splitlines()[site.line - 1].find(marker)
    m = re.match(r"\d+", line[at:])
    return m.group(0) if m else None


# --- beyond the block: grids, template arguments, tiles ----------------------------------------------


def _launch_view(source: str, kernels: Sequence[str], defines: Sequence[str]) -> list[tuple[str, ...]]:
    """Each launch of `kernels` as (grid, template arguments): what a constant may change."""
    directives = parse_directives(source)
    host = parse_host(source, defines)
    out: list[tuple[str, ...]] = []
    for kernel in kernels:
        comments = directives.launches_of(kernel)
        if comments:
            out += [(d.grid, "") for d in comments]
            continue
        out += [(x.grid.python() or x.grid.text, ",".join(x.template_args)) for x in host.launches_of(kernel)]
    return out


def _kernel_bodies(source: str, kernels: Sequence[str]) -> str:
    code = without_preprocessor(blank_comments(source))
    names = {k.split("<")[0] for k in kernels}
    return " ".join(
        code[s.open : s.close] for s in find_functions(code, source) if s.name.rpartition("::")[2] in names
    )


def _powers(value: int, down: int, up: int, low: int = 1, high: int = 1 << 16) -> tuple[int, ...]:
    values = {value << k for k in range(up + 1)} | {
        value >> k for k in range(1, down + 1) if value % (1 << k) == 0
    }
    return tuple(sorted(v for v in values if low <= v <= high))


def launch_constants(source: str, kernels: Sequence[str], defines: Sequence[str] = ()) -> list[BlockConstant]:
    """Every constant of the launches of `kernels` the tuner may vary, each with its choices and
    its role: the block constants (`block_constants`), then those that change a launch's grid
    (a cap, a fixed number of blocks) or its template arguments, then integer constants the
    launched kernels' bodies read (tiles, items per thread). Values are powers of two around the
    current one; launch limits (threads and shared memory per block) are the tuner's to check."""
    found = block_constants(source, kernels, defines)
    seen = {c.key for c in found} | {c.name for c in found}
    before = _launch_view(source, kernels, defines)
    if not before and not found:
        return found
    bodies = _kernel_bodies(source, kernels)
    constants = read_constants(source)
    for site in _sites(source, kernels):
        if site.key in seen or site.name in seen or site.value < 1:
            continue
        after = _launch_view(set_constant(source, site, site.value * 2), kernels, defines)
        grids = any(a[0] != b[0] for a, b in zip(before, after, strict=False))
        templates = any(a[1] != b[1] for a, b in zip(before, after, strict=False))
        if site.role == "template" or templates:
            role, choices = "template", _powers(site.value, 2, 2, low=1)
        elif grids:
            role, choices = "grid", _powers(site.value, 3, 3)
        elif site.name in constants.raw and re.search(rf"\b{re.escape(site.name)}\b", bodies):
            role, choices = "tile", _powers(site.value, 1, 2, low=1)
        else:
            continue
        if len(choices) > 1 and site.value in choices:
            found.append(
                BlockConstant(site.key, site.name, site.line, site.value, site.arg, site.macro, choices, role)
            )
            seen |= {site.key, site.name}
    return found


_SHARED = re.compile(
    r"__shared__\s+(?:(?:volatile|const|unsigned|signed)\s+)*([A-Za-z_][\w:]*)\s+[A-Za-z_]\w*\s*((?:\[[^\]]+\]\s*)+);"
)
_ELEMENT_BYTES = {
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "double": 8,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "char": 1,
    "short": 2,
    "long": 8,
    "float2": 8,
    "float4": 16,
    "int2": 8,
    "int4": 16,
    "uint32_t": 4,
    "int32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "int8_t": 1,
    "uint8_t": 1,
    "size_t": 8,
}


def static_shared_bytes(source: str, kernels: Sequence[str], defines: Sequence[str] = ()) -> dict[str, int]:
    """{kernel: bytes of its `__shared__` arrays} where their sizes evaluate from the file's
    constants (a template parameter's size is left out: the compile says it)."""
    constants = read_constants(source, tuple(defines))
    code = without_preprocessor(blank_comments(source))
    out: dict[str, int] = {}
    names = {k.split("<")[0] for k in kernels}
    for s in find_functions(code, source):
        name = s.name.rpartition("::")[2]
        if name not in names:
            continue
        total = 0
        for m in _SHARED.finditer(code[s.open : s.close]):
            size = _ELEMENT_BYTES.get(m.group(1))
            if size is None:
                continue
            for dim in re.findall(r"\[([^\]]+)\]", m.group(2)):
                v = constants.evaluate(dim.strip(), {})
                if not isinstance(v, int):
                    size = None
                    break
                size *= v
            total += size or 0
        out[name] = total
    return out


def nothing_to_tune(source: str, kernels: Sequence[str], defines: Sequence[str] = ()) -> str:
    """Why the launches of `kernels` have nothing the tuner can vary, in words: each launch's
    block as written and what it comes from."""
    if not kernels:
        return "the spec launches no kernel kernel-lsp can see in the file"
    directives = parse_directives(source)
    host = parse_host(source, defines)
    reasons = []
    for kernel in kernels:
        comments = directives.launches_of(kernel)
        launches = host.launches_of(kernel)
        if not comments and not launches:
            reasons.append(f"`{kernel}` has no launch in the file's host code nor a launch line")
            continue
        for d in comments:
            reasons.append(f"the launch line of `{kernel}` gives block `{d.block}`, which no constant sets")
        for x in launches:
            if not x.block.resolved:
                reasons.append(f"{x.where()} takes its block from {x.block.reason or x.block.text}")
            elif x.block.symbols:
                reasons.append(
                    f"{x.where()} takes its block `{x.block.describe()}` from the parameter(s) "
                    f"{', '.join(f'`{p}`' for p in x.block.symbols)} of `{x.function}`, the caller's to choose"
                )
            else:
                reasons.append(
                    f"{x.where()} launches `{kernel}` with block `{x.block.text}`: a literal the grid does not "
                    "repeat, and no constant of the file sets its grid, template arguments or tiles"
                )
    return "; ".join(dict.fromkeys(reasons))
