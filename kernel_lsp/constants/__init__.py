"""The one reader of a file's integer constants: `#define BLOCK (2*128)` is 256, `constexpr int
kThreads = 256;`, `enum { TILE = 32 };`, function-like macros (`CEIL_DIV(a, b)`) and one-line
helpers (`int ceil_div(int a, int b) { return (a + b - 1) / b; }`), evaluated with `cexpr`.

Macros: `-D` values first (they win over an `#ifndef NAME` default), then the first `#define` of
a name in the source. File-scope constants are those outside every function and class
(namespaces and `extern "C" {` blocks count as file scope). Never raises on user text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .cexpr import Evaluator, Expr, Function, Lookup, Num, int_value, parse
from .text import blank_comments

_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?P<params>\([^)\n]*\))?(?P<body>(?:[^\n\\]|\\.|\\\n)*)",
    re.M,
)
_PREPROCESSOR_LINE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.M)
_DECL = re.compile(
    r"\b(?P<quals>(?:(?:static|constexpr|const|inline|__device__|__host__)\s+)+)"
    r"(?P<type>(?:unsigned\s+|signed\s+|long\s+|short\s+)*(?:int|long|short|char|unsigned|size_t|"
    r"u?int(?:8|16|32|64)_t|auto|bool|uint|index_t|ptrdiff_t|float|double)\b)\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<eq>[^;{}]+)|\{(?P<brace>[^;{}]*)\})\s*;"
)
_ENUM = re.compile(
    r"\benum\b(?:\s+class|\s+struct)?(?:\s+[A-Za-z_]\w*)?(?:\s*:\s*[\w\s]+)?\s*\{(?P<body>[^{}]*)\}"
)
_ONE_LINE_BODY = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?\{\s*return\b(?P<body>[^;{}]*);\s*\}")
_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "return", "catch", "sizeof"})


@dataclass
class Constants:
    """A file's integer macros, file-scope constants and one-line functions, evaluated on demand."""

    raw: dict[str, str] = field(default_factory=dict)  # name -> expression text
    functions: dict[str, Function] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)  # name -> 1-based line (0: from -D)
    kinds: dict[str, str] = field(default_factory=dict)  # "-D" | "macro" | "constexpr" | "const" | "enum"
    _values: dict[str, Expr | None] = field(default_factory=dict, repr=False)

    def expression(self, name: str) -> Expr | None:
        """The evaluated expression of constant `name` (a Num when it has a value)."""
        if name in self._values:
            return self._values[name]
        if name not in self.raw:
            return None
        self._values[name] = None  # a constant defined through itself stays unresolved
        parsed = parse(self.raw[name])
        value = self.evaluator().simplify(parsed) if parsed is not None else None
        self._values[name] = value
        return value

    def evaluator(self, lookup: Lookup | None = None) -> Evaluator:
        """An evaluator that falls back to these constants for names `lookup` does not bind."""

        def find(n: str) -> Expr | None:
            bound = lookup(n) if lookup else None
            return bound if bound is not None else self.expression(n)

        return Evaluator(find, self.functions)

    def value(self, name: str) -> int | None:
        v = int_value(self.expression(name))
        return v if isinstance(v, int) else None

    def values(self) -> dict[str, int]:
        """Every constant with an integer value."""
        return {name: v for name in self.raw if (v := self.value(name)) is not None}

    def evaluate(self, text: str, names: Mapping[str, int] | None = None) -> int | tuple[int, ...] | None:
        """`text`'s value with these constants and `names`; a tuple for `(16, 16)`."""
        e = parse(text)
        if e is None:
            return None
        scope = dict(names or {})
        return int_value(self.evaluator(lambda n: Num(scope[n]) if n in scope else None).simplify(e))


def without_preprocessor(code: str) -> str:
    """`code` with preprocessor lines (and their continuations) blanked, newlines kept."""
    return _PREPROCESSOR_LINE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


def file_scope_marks(code: str) -> list[tuple[int, bool]]:
    """(offset, at file scope from there on) after each brace of comment-free `code`; namespaces
    and `extern "C" {` blocks are file scope."""
    marks: list[tuple[int, bool]] = []
    stack: list[bool] = []  # True: a namespace-like brace
    # Strings are blanked in `code`: `extern "C" {` reads `extern     {`.
    for m in re.finditer(r"\bnamespace\b[^{};]*\{|\bextern\s*\{|[{}]", code):
        text = m.group(0)
        if text == "}":
            if stack:
                stack.pop()
        else:
            stack.append(text != "{")
        marks.append((m.end(), all(stack)))
    return marks


def _at_file_scope(marks: list[tuple[int, bool]], offsets: list[int], at: int) -> bool:
    k = bisect.bisect_right(offsets, at) - 1
    return k < 0 or marks[k][1]


def _matching_open(code: str, close: int) -> int:
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return -1


def read_constants(source: str, defines: Sequence[str] = ()) -> Constants:
    """The macros (-D first, then the first `#define` of each name), file-scope `constexpr`,
    `const` and enum integers, and one-line functions of `source`."""
    out = Constants()

    def add(name: str, text: str, kind: str, line: int) -> None:
        if name not in out.raw and text:
            out.raw[name], out.kinds[name], out.lines[name] = text, kind, line

    for d in defines:
        name, eq, value = d.partition("=")
        if re.fullmatch(r"[A-Za-z_]\w*", name.strip()):
            add(name.strip(), value.strip() if eq else "1", "-D", 0)
    code = blank_comments(source)
    for m in _DEFINE.finditer(code):
        body = m.group("body").replace("\\\n", " ").strip()
        if m.group("params") is None:
            add(m.group("name"), body, "macro", code.count("\n", 0, m.start()) + 1)
            continue
        params = tuple(p.strip() for p in m.group("params")[1:-1].split(",") if p.strip())
        parsed = parse(body) if body else None
        if parsed is not None and m.group("name") not in out.functions:
            out.functions[m.group("name")] = Function(params, parsed)
    code = without_preprocessor(code)
    marks = file_scope_marks(code)
    offsets = [o for o, _ in marks]
    for m in _DECL.finditer(code):
        quals = m.group("quals").split()
        if ("const" in quals or "constexpr" in quals) and _at_file_scope(marks, offsets, m.start()):
            text = (m.group("eq") or m.group("brace") or "").strip()
            kind = "constexpr" if "constexpr" in quals else "const"
            add(m.group("name"), text, kind, code.count("\n", 0, m.start("name")) + 1)
    for m in _ENUM.finditer(code):
        if not _at_file_scope(marks, offsets, m.start()):
            continue
        previous = "-1"
        for item in m.group("body").split(","):
            name, eq, value = item.partition("=")
            name = name.strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                continue
            text = value.strip() if eq else f"({previous}) + 1"
            add(name, text, "enum", code.count("\n", 0, m.start()) + 1)
            previous = name
    for m in _ONE_LINE_BODY.finditer(code):
        open_paren = _matching_open(code, m.start())
        head = re.search(r"([A-Za-z_]\w*)\s*$", code[max(0, open_paren - 200) : open_paren])
        if open_paren < 0 or not head or head.group(1) in _NOT_FUNCTIONS or head.group(1) in out.functions:
            continue
        before = code[max(0, open_paren - 200) : open_paren]
        if "__global__" in before.rsplit(";", 1)[-1].rsplit("}", 1)[-1]:
            continue
        params = []
        for p in code[open_paren + 1 : m.start()].split(","):
            words = re.findall(r"[A-Za-z_]\w*", p.split("=")[0])
            if words:
                params.append(words[-1])
        body = parse(m.group("body"))
        if body is not None:
            out.functions[head.group(1)] = Function(tuple(params), body)
    return out


def macro_values(source: str, defines: Sequence[str] = ()) -> dict[str, int]:
    """Every integer constant of the file (macros, -D, file-scope constexpr/const/enum) by name."""
    return read_constants(source, defines).values()
