"""The one reader of a file's integer constants: `#define BLOCK (2*128)` is 256, `constexpr int
kThreads = 256;`, `enum { TILE = 32 };`, function-like macros (`CEIL_DIV(a, b)`) and one-line
helpers (`int ceil_div(int a, int b) { return (a + b - 1) / b; }`), evaluated with `cexpr`.

Macros: `-D` values first (they win over an `#ifndef NAME` default), then the first `#define` of
a name in the source. File-scope constants are those outside every function and class
(namespaces and `extern "C" {` blocks count as file scope). A class's `static constexpr` (or
`static const`) members are read too, under their qualified names (`Config::kThreads`,
`ns::Config::kThreads`; inside the class its members' own names), and so are namespaced constants
under theirs (`cfg::kWarps`). The constants of the headers a file includes (`included`, read by
the caller: this package reads no file) answer for the names the file does not define. Never
raises on user text.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..lexer import blank_comments, matching_back, split_top
from .cexpr import Evaluator, Expr, Function, Lookup, Num, int_value, parse

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
    # Constants of a namespace or a class by their full names (`cfg::kWarps`, `ns::Config::kThreads`;
    # kinds and lines share these keys: a `::` in them keeps them apart from `raw`'s), the scope
    # each is written in, and the shorter spellings of a member (`Config::kThreads`).
    scoped: dict[str, str] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    # The constants of the headers the file includes, in the order the preprocessor reads them,
    # made by `loader` at the first name the file does not define (most launches need none of
    # them); a header's own `context` is the file's, whose other headers its expressions may use.
    included: list[Constants] = field(default_factory=list, repr=False)
    loader: Callable[[], list[Constants]] | None = field(default=None, repr=False)
    context: Constants | None = field(default=None, repr=False)
    origin: str = ""  # the header these were read from; "" for the file itself
    _values: dict[str, Expr | None] = field(default_factory=dict, repr=False)

    def text(self, key: str) -> str:
        return self.raw[key] if key in self.raw else self.scoped[key]

    def _own(self, name: str) -> str | None:
        key = name.strip().removeprefix("::")
        if "::" in key:
            key = self.aliases.get(key, key)
            return key if key in self.scoped else None
        return key if key in self.raw else None

    @property
    def has_headers(self) -> bool:
        return bool(self.included) or self.loader is not None

    def _chain(self) -> Iterator[Constants]:
        """These constants, the file's, then its headers' (read now if not yet)."""
        top = self.context or self
        yield self
        if top is not self:
            yield top
        if top.loader is not None:
            loader, top.loader = top.loader, None
            top.included.extend(loader())
        yield from (c for c in top.included if c is not self)

    def find(self, name: str) -> tuple[Constants, str] | None:
        """(the constants that define `name`, its key there): this file's first, then its
        headers' in include order; None when no one defines it."""
        for c in self._chain():
            key = c._own(name)
            if key is not None:
                return c, key
        return None

    def expression(self, name: str) -> Expr | None:
        """The evaluated expression of constant `name` (a Num when it has a value)."""
        found = self.find(name)
        return found[0]._evaluated(found[1]) if found is not None else None

    def _evaluated(self, key: str) -> Expr | None:
        if key in self._values:
            return self._values[key]
        self._values[key] = None  # a constant defined through itself stays unresolved
        parsed = parse(self.text(key))
        value = self._evaluator_in(self.scopes.get(key, "")).simplify(parsed) if parsed is not None else None
        self._values[key] = value
        return value

    def _evaluator_in(self, scope: str) -> Evaluator:
        """In a class or namespace, a name is first its own members' (`kThreads` in `Config`)."""
        enclosing = [scope.rsplit("::", k)[0] for k in range(scope.count("::") + 1)] if scope else []

        def find(n: str) -> Expr | None:
            for outer in enclosing:
                if (e := self.expression(f"{outer}::{n}")) is not None:
                    return e
            return self.expression(n)

        return Evaluator(find, self.all_functions())

    def all_functions(self) -> Mapping[str, Function]:
        """The file's function-like macros and helpers, then its headers' (`ceil_div` from a
        utilities header; the headers read only for a name the file lacks)."""
        return self.functions if not self.has_headers and self.context is None else _Functions(self)

    def evaluator(self, lookup: Lookup | None = None) -> Evaluator:
        """An evaluator that falls back to these constants for names `lookup` does not bind."""

        def find(n: str) -> Expr | None:
            bound = lookup(n) if lookup else None
            return bound if bound is not None else self.expression(n)

        return Evaluator(find, self.all_functions())

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


class _Functions(Mapping[str, Function]):
    """The functions along a Constants' chain, looked up on demand (what `Evaluator` asks)."""

    def __init__(self, constants: Constants) -> None:
        self._constants = constants

    def __getitem__(self, name: str) -> Function:
        for c in self._constants._chain():
            if name in c.functions:
                return c.functions[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(n for c in self._constants._chain() for n in c.functions))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:  # `functions or {}` must not read the headers to count them
        return True


def without_preprocessor(code: str) -> str:
    """`code` with preprocessor lines (and their continuations) blanked, newlines kept."""
    return _PREPROCESSOR_LINE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


# The braces that open a scope constants can live in: `namespace a::b {`, `namespace {`,
# `extern "C" {` (its string blanked), `struct Config {`, `class alignas(16) Tile : Base<T> {`.
_SCOPE_BRACE = re.compile(
    r"\bnamespace\b\s*(?P<ns>[A-Za-z_][\w:]*)?[^{};]*\{"
    r"|\bextern\s*\{"
    r"|\b(?:struct|class|union)\s+(?:(?:alignas|__align__)\s*\([^()]*\)\s*)?(?P<cls>[A-Za-z_]\w*)"
    r"(?:\s+final)?\s*(?::[^{};]*)?\{"
    r"|[{}]"
)
Scope = tuple[tuple[str, str], ...]  # ("namespace" | "class", name) from the outside in


def scope_marks(code: str) -> list[tuple[int, Scope | None]]:
    """(offset, the scope from there on) after each brace of comment-free `code`: the named
    namespaces and classes around it, or None inside a function or any other brace. Anonymous
    namespaces and `extern "C"` blocks add no name."""
    marks: list[tuple[int, Scope | None]] = []
    stack: list[tuple[str, str] | None] = []  # None: a brace that is no scope; ("", ""): unnamed
    for m in _SCOPE_BRACE.finditer(code):
        if m.group(0) == "}":
            if stack:
                stack.pop()
        elif m.group("ns") is not None:
            stack.append(("namespace", m.group("ns")))
        elif m.group("cls") is not None:
            stack.append(("class", m.group("cls")))
        elif m.group(0) != "{":  # `namespace {`, `extern "C" {`
            stack.append(("", ""))
        else:
            stack.append(None)
        if any(entry is None for entry in stack):
            marks.append((m.end(), None))
        else:
            marks.append((m.end(), tuple(e for e in stack if e and e[1])))
    return marks


def scope_opened(code: str, start: int, brace: int) -> str | None:
    """"namespace" (a named or unnamed namespace, an `extern "C"` block) or "class" when the `{`
    at `brace` of comment-free `code`, its statement starting at `start`, opens such a scope;
    None when it opens a function's body, an initializer or any other block."""
    for m in _SCOPE_BRACE.finditer(code, start, brace + 1):
        if m.end() == brace + 1 and m.group(0) != "{":
            return "class" if m.group("cls") is not None else "namespace"
    return None


def _scope_at(marks: list[tuple[int, Scope | None]], offsets: list[int], at: int) -> Scope | None:
    k = bisect.bisect_right(offsets, at) - 1
    return () if k < 0 else marks[k][1]


def _qualified(scope: Scope) -> str:
    return "::".join(name for _, name in scope)


def read_constants(source: str, defines: Sequence[str] = ()) -> Constants:
    """The macros (-D first, then the first `#define` of each name), file-scope `constexpr`,
    `const` and enum integers, and one-line functions of `source`. A new Constants each call
    (callers attach headers and evaluate into it); the reading itself is done once per text
    (one check of a file asked for it six times: 12 ms of a 110 ms NVRTC save)."""
    read = _read_constants(source, tuple(defines))
    return Constants(
        raw=dict(read.raw),
        functions=dict(read.functions),
        lines=dict(read.lines),
        kinds=dict(read.kinds),
        scoped=dict(read.scoped),
        scopes=dict(read.scopes),
        aliases=dict(read.aliases),
    )


@functools.lru_cache(maxsize=16)
def _read_constants(source: str, defines: tuple[str, ...]) -> Constants:
    out = Constants()

    def add(name: str, text: str, kind: str, line: int) -> None:
        if name not in out.raw and text:
            out.raw[name], out.kinds[name], out.lines[name] = text, kind, line

    def add_scoped(scope: Scope, name: str, text: str, kind: str, line: int) -> None:
        """A constant of a namespace (also its plain name, as before) or a class member (only
        its qualified names: a bare `kThreads` outside `Config` is none of its)."""
        in_class = any(kind_ == "class" for kind_, _ in scope)
        if not in_class:
            add(name, text, kind, line)
        if not scope or not text:
            return
        full = f"{_qualified(scope)}::{name}"
        if full not in out.scoped:
            out.scoped[full], out.kinds[full], out.lines[full] = text, kind, line
            out.scopes[full] = _qualified(scope)
        # `Outer::Config::k` and `Config::k` for `ns::Outer::Config::k`, written inside `ns`.
        for k in range(1, len(scope)):
            out.aliases.setdefault(f"{_qualified(scope[k:])}::{name}", full)

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
    marks = scope_marks(code)
    offsets = [o for o, _ in marks]
    for m in _DECL.finditer(code):
        quals = m.group("quals").split()
        scope = _scope_at(marks, offsets, m.start())
        if scope is None or not ("const" in quals or "constexpr" in quals):
            continue
        if any(kind == "class" for kind, _ in scope) and "static" not in quals:
            continue  # a const data member is each object's, not a constant of the class
        text = (m.group("eq") or m.group("brace") or "").strip()
        kind = "constexpr" if "constexpr" in quals else "const"
        add_scoped(scope, m.group("name"), text, kind, code.count("\n", 0, m.start("name")) + 1)
    for m in _ENUM.finditer(code):
        scope = _scope_at(marks, offsets, m.start())
        if scope is None:
            continue
        previous = "-1"
        for item in split_top(m.group("body")):
            name, eq, value = item.partition("=")
            name = name.strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                continue
            text = value.strip() if eq else f"({previous}) + 1"
            add_scoped(scope, name, text, "enum", code.count("\n", 0, m.start()) + 1)
            previous = name
    for m in _ONE_LINE_BODY.finditer(code):
        open_paren = matching_back(code, m.start())
        head = re.search(r"([A-Za-z_]\w*)\s*$", code[max(0, open_paren - 200) : open_paren])
        if open_paren < 0 or not head or head.group(1) in _NOT_FUNCTIONS or head.group(1) in out.functions:
            continue
        before = code[max(0, open_paren - 200) : open_paren]
        if "__global__" in before.rsplit(";", 1)[-1].rsplit("}", 1)[-1]:
            continue
        names: list[str] = []
        for p in split_top(code[open_paren + 1 : m.start()]):
            words = re.findall(r"[A-Za-z_]\w*", p.split("=")[0])
            if words:
                names.append(words[-1])
        body = parse(m.group("body"))
        if body is not None:
            out.functions[head.group(1)] = Function(tuple(names), body)
    return out


def macro_values(source: str, defines: Sequence[str] = ()) -> dict[str, int]:
    """Every integer constant of the file (macros, -D, file-scope constexpr/const/enum) by name."""
    return read_constants(source, defines).values()
