"""Constants that set the block size of a kernel's launches, for the tuner: `#define BLOCK_SIZE
256`, `constexpr int threadsPerBlock = 256;`, `int threads = 256;` in the launcher, `dim3
block(16, 16)`. A constant counts when changing it changes the block of a launch of the kernel
(the file is read again with the value doubled), so only constants a launch really uses are
offered; a tuner candidate rewrites the constant's value in place."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..compile.artifact import literal_launch_value
from ..constants import read_constants, without_preprocessor
from ..source import blank_comments, parse_directives
from .launches import parse_host
from .model import launch_matches
from .scan import bindings, find_functions, matching, split_top, statements

_LITERAL = re.compile(r"^\(?\s*(\d+)[uUlL]*\s*\)?$")
# The key of a launch's literal block (`k<<<cdiv, 128>>>`), as optimizer.tunables names it.
LAUNCH_LITERAL = "launch.block"
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
    used = " ".join(
        [code[s.open : s.close] for s in spans] + [f"{d.grid} {d.block} {d.smem}" for d in comments]
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


def _set_argument(text: str, name: str, index: int, value: str) -> str:
    m = re.search(rf"\b{re.escape(name)}\s*(?:=\s*dim3\s*)?([({{])", text)
    if not m:
        return text
    open_ = m.start(1)
    close = matching(text, open_)
    if close < 0:
        return text
    parts = text[open_ + 1 : close].split(",")
    if index >= len(parts) or not _LITERAL.match(parts[index].strip()):
        return text
    parts[index] = re.sub(r"\d+[uUlL]*", value, parts[index], count=1)
    return text[: open_ + 1] + ",".join(parts) + text[close:]


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


def is_constant_key(key: str) -> bool:
    """Whether a tuner parameter names a constant in code (`threads@12`), not a macro."""
    return _KEY.match(key) is not None


def site_of(key: str, source: str = "") -> BlockConstant | None:
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
    marker = "918273645"  # found where the value is by setting it to a number no file has
    changed = set_constant(source, site, marker)
    if changed == source:
        return None
    line = source.splitlines()[site.line - 1]
    at = changed.splitlines()[site.line - 1].find(marker)
    m = re.match(r"\d+", line[at:])
    return m.group(0) if m else None
