"""The shape of C++ text that launches need, without a C++ parser: function bodies at namespace
level, the statements of a body with the blocks around each, and what each statement binds
(declarations, assignments, variables a call writes through `&x`, loop variables).

Works on comment-free text with preprocessor lines blanked (`constants.without_preprocessor`), so
offsets and lines match the source. Braces of an `#if`/`#else` pair that do not balance, or code
this reader does not follow, cost that function, never the file."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ..constants.cexpr import Binary, Braced, Call, Expr, Name, Num, parse
from ..lexer import matching, matching_back, split_top
from ..source import Param, parse_params

CONTROL = ("if", "else", "for", "while", "do", "switch", "case", "default")
_NOT_TYPES = frozenset(
    {
        "return",
        "delete",
        "throw",
        "goto",
        "break",
        "continue",
        "using",
        "typedef",
        "new",
        "sizeof",
        "static_assert",
        "co_return",
        "template",
        *CONTROL,
    }
)
_NOT_FUNCTIONS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas"}
)
_QUALIFIERS = (
    "static",
    "inline",
    "extern",
    "__global__",
    "__device__",
    "__host__",
    "__forceinline__",
    "__noinline__",
    "constexpr",
    "virtual",
)


class Lines:
    """Offsets -> 1-based (line, column), by bisection over the line starts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def col(self, offset: int) -> int:
        return offset - self.starts[self.line(offset) - 1] + 1


# --- functions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSpan:
    name: str
    name_offset: int
    open: int  # offset of the body's `{`
    close: int  # offset of its `}`
    params: tuple[Param, ...]
    return_type: str
    qualifiers: tuple[str, ...]
    template_params: tuple[str, ...]
    extern_c: bool


def template_params(header: str) -> tuple[str, ...]:
    """`template <typename T, int BLOCK = 256>` -> ("T", "BLOCK")."""
    m = re.search(r"\btemplate\s*<", header)
    if not m:
        return ()
    close = matching(header, m.end() - 1)
    if close < 0:
        return ()
    names = []
    for part in split_top(header[m.end() : close]):
        words = re.findall(r"[A-Za-z_]\w*", part.split("=")[0])
        if words and words[-1] not in ("typename", "class"):
            names.append(words[-1])
    return tuple(names)


def find_functions(code: str, raw: str) -> list[FunctionSpan]:
    """Every function defined at namespace level (or in an `extern "C" {` block or a class) with a
    body, in order. `raw` is the source itself, for `extern "C"` (strings are blank in `code`)."""
    out: list[FunctionSpan] = []
    stack: list[str] = []  # "ns" | "extern" | "class" | "func" | "block"
    boundary = -1
    for m in re.finditer(r"[{};]", code):
        c, at = m.group(0), m.start()
        if c == ";":
            if not stack or stack[-1] in ("ns", "extern", "class"):
                boundary = at
            continue
        if c == "}":
            if stack:
                stack.pop()
            if not stack or stack[-1] in ("ns", "extern", "class"):
                boundary = at
            continue
        if stack and stack[-1] in ("func", "block"):
            stack.append("block")
            continue
        header = code[boundary + 1 : at]
        kind = _classify(header)
        if kind == "func":
            span = _function(code, raw, boundary + 1, at, "extern" in stack)
            if span is None:
                kind = "block"
            else:
                close = matching(code, at)
                if close < 0:
                    kind = "block"
                else:
                    out.append(
                        FunctionSpan(
                            span[0],
                            span[1],
                            at,
                            close,
                            span[2],
                            span[3],
                            span[4],
                            span[5],
                            span[6],
                        )
                    )
        stack.append(kind)
        boundary = at
    return out


def _classify(header: str) -> str:
    h = header.strip()
    if re.search(r"\bnamespace\b", h):
        return "ns"
    if re.fullmatch(r"extern", h):  # `extern "C" {` with the string blanked
        return "extern"
    if re.search(r"\)\s*(?:const|noexcept|override|final|mutable|\s)*(?:->\s*[\w:<>,\s*&]+)?$", h):
        return "func"
    if re.search(r"\b(class|struct|union|enum)\b", h):
        return "class"
    return "block"


def _function(code: str, raw: str, start: int, brace: int, in_extern: bool):
    """(name, name offset, params, return type, qualifiers, template params, extern "C") of the
    function whose header runs from `start` to its body's `{`, or None (not a function)."""
    header = code[start:brace]
    close = header.rfind(")")
    if close < 0:
        return None
    # A constructor's member initialisers (`: x(a), y(b)`) come after the parameter list.
    open_ = matching_back(header, close)
    if open_ < 0:
        return None
    before = header[:open_]
    m = re.search(r"(~?[A-Za-z_]\w*(?:\s*::\s*~?[A-Za-z_]\w*)*)\s*$", before)
    if not m:
        return None
    qualified = re.sub(r"\s+", "", m.group(1))
    name = qualified.rpartition("::")[2]
    if name in _NOT_FUNCTIONS or name == "__launch_bounds__" or name in _QUALIFIERS:
        return None
    prefix = before[: m.start()]
    # `__global__ void __launch_bounds__(256) k(...)`: the bounds are no part of the type.
    prefix = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", prefix)
    tparams = template_params(prefix)
    prefix = re.sub(r"\btemplate\s*<.*?>\s*(?=[A-Za-z_])", " ", prefix, flags=re.S)
    words = prefix.split()
    qualifiers = tuple(w for w in words if w in _QUALIFIERS)
    return_type = " ".join(w for w in words if w not in _QUALIFIERS) or "void"
    params = parse_params(header[open_ + 1 : close])
    raw_header = raw[start:brace]
    extern_c = in_extern or bool(re.search(r'extern\s+"C"', raw_header))
    return qualified, start + m.start(1), params, return_type, qualifiers, tparams, extern_c


# --- statements ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    start: int  # offset of the statement's text in the code
    text: str  # as written, without the `;`
    blocks: tuple[int, ...]  # the `{` offsets of the blocks around it, outermost first
    conditional: bool  # a braceless branch: `if (x) t = 1;`, `else t = 2;`, `case 4: t = 4;`
    header: bool = False  # the head of a block (`for (int t = 32; ...)`, `if (...)`)


_LAMBDA_HEAD = re.compile(r"\]\s*(?:\([^()]*\))?\s*(?:mutable\s*)?(?:->\s*[\w:<>\s*&]+)?$")


def _opens_block(head: str, in_parens: bool) -> bool:
    """Whether a `{` after `head` opens a block (rather than a braced initializer)."""
    h = head.strip()
    if _LAMBDA_HEAD.search(h):
        return True
    if in_parens:
        return False
    return not h or h.endswith((")", ":")) or bool(re.search(r"\b(else|do|try)$", h))


def statements(code: str, open_: int, close: int) -> list[Statement]:
    """The statements of the body between `open_` and `close` (its braces), in order."""
    out: list[Statement] = []
    blocks: list[int] = [open_]
    saved: list[int] = []
    depth = 0
    start = open_ + 1
    i = open_ + 1

    def emit(end: int, header: bool = False) -> None:
        text = code[start:end]
        if text.strip():
            lead = len(text) - len(text.lstrip())
            stripped, conditional = _strip_control(text.strip())
            offset = start + lead + text.strip().find(stripped) if stripped else start + lead
            loop = re.match(r"for\s*\(", text.strip())
            if loop and stripped != text.strip():  # a braceless loop body: its head binds too
                out.append(Statement(start + lead, text.strip(), tuple(blocks), False, True))
            out.append(Statement(offset, stripped, tuple(blocks), conditional, header))

    while i < close:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(0, depth - 1)
        elif c == ";" and depth == 0:
            emit(i)
            start = i + 1
        elif c == "{":
            if _opens_block(code[start:i], depth > 0):
                emit(i, header=True)
                blocks.append(i)
                saved.append(depth)
                depth = 0
                start = i + 1
            else:
                end = matching(code, i, close)
                if end < 0:
                    break
                i = end
        elif c == "}":
            emit(i)
            if len(blocks) > 1:
                blocks.pop()
                depth = saved.pop()
            start = i + 1
        i += 1
    return out


def _strip_control(text: str) -> tuple[str, bool]:
    """`if (n < 1024) threads = 128` -> ("threads = 128", True); labels and `else` likewise."""
    conditional = False
    while True:
        m = re.match(r"(?:else\b|do\b|case\b[^:]*:(?!:)|default\s*:)\s*", text)
        if m:
            text, conditional = text[m.end() :], True
            continue
        m = re.match(r"(?:if|for|while|switch)\s*(?:constexpr\s*)?\(", text)
        if m:
            end = matching(text, m.end() - 1)
            if end < 0:
                return text, True
            rest = text[end + 1 :].lstrip()
            if not rest:  # a block head: keep it whole (the caller reads loop variables from it)
                return text, True
            text, conditional = rest, True
            continue
        return text, conditional


# --- bindings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """What a statement does to a name before a launch reads it."""

    name: str  # "threads", "grid", "grid.x", "config.blockDim"
    offset: int
    kind: str  # "decl" | "assign" | "loop" | "out" | "uninit"
    value: Expr | None  # dim3 values are Braced (x, y, z); None: not readable
    statement: Statement
    dim3: bool = False
    type: str = ""
    init_text: str = ""  # the initializer as written (an argument array's `{&a, &b}`)


_ASSIGN = re.compile(
    r"^(?P<lhs>[A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)\s*(?P<op><<|>>|[-+*/%&|^])?=(?!=)(?P<rhs>.*)$",
    re.S,
)
_STEP = re.compile(
    r"^(?:(?P<pre>\+\+|--)\s*(?P<a>[A-Za-z_][\w.]*)|(?P<b>[A-Za-z_][\w.]*)\s*(?P<post>\+\+|--))$"
)
_DECL = re.compile(
    r"^(?P<type>(?:(?:const|constexpr|static|volatile|register|unsigned|signed|long|short|struct|"
    r"__restrict__|thread_local)\s+)*[A-Za-z_][\w:]*(?:\s*<[^;=(){}]*>)?"
    r"(?:\s+(?:const|long|int|short|unsigned|char|double))*)(?P<rest>[\s*&]+[A-Za-z_]\w*\s*(?:[=({\[,].*)?)$",
    re.S,
)
_DECLARATOR = re.compile(
    r"^\s*[*&\s]*(?:const\s+)?(?P<name>[A-Za-z_]\w*)\s*(?P<arr>(?:\[[^\]]*\]\s*)*)"
    r"(?:=\s*(?P<eq>.*)|\((?P<paren>.*)\)|\{(?P<brace>.*)\})?\s*$",
    re.S,
)
_DESIGNATED = re.compile(r"^\.\s*(?P<field>[A-Za-z_]\w*)\s*=\s*(?P<value>.+)$", re.S)
_CALL = re.compile(r"([A-Za-z_][\w:.]*)\s*(?:<[^<>;()]*>)?\s*\(")
_LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchKernelEx",
    "cudaLaunchKernelExC",
)


def dim3_value(e: Expr | None) -> Expr | None:
    """A dim3 initializer as (x, y, z): `dim3(a, b)` and `{a, b}` padded with 1; a name or a
    scalar stays itself (the resolver tells an alias of another dim3 from a size)."""
    if isinstance(e, Call) and e.func in ("dim3", "::dim3"):
        e = Braced(e.args)
    if isinstance(e, Braced):
        items = list(e.items[:3]) + [Num(1)] * (3 - len(e.items[:3]))
        return Braced(tuple(items))
    return e


def bindings(stmts: list[Statement]) -> dict[str, list[Binding]]:
    """Name -> its bindings in order, from the statements of one body."""
    out: dict[str, list[Binding]] = {}

    def add(b: Binding) -> None:
        out.setdefault(b.name, []).append(b)

    for s in stmts:
        text = s.text.strip()
        if s.header:
            for_init = re.match(r"for\s*\((?P<init>[^;]*);", text)
            if for_init:
                decl = _declaration(for_init.group("init").strip())
                for name, *_ in decl or ():
                    add(Binding(name, s.start, "loop", None, s))
            continue
        _out_params(s, add)
        m = _ASSIGN.match(text)
        if m and m.group("lhs").split(".")[0].strip() not in _NOT_TYPES:
            lhs = re.sub(r"\s+", "", m.group("lhs")).replace("->", ".")
            rhs = dim3_value(parse(m.group("rhs")))
            if m.group("op") and rhs is not None:
                rhs = Binary(m.group("op"), Name(lhs), rhs)
            add(Binding(lhs, s.start, "assign", rhs, s, init_text=m.group("rhs").strip()))
            continue
        m = _STEP.match(text)
        if m:
            name = m.group("a") or m.group("b")
            op = "+" if (m.group("pre") or m.group("post")) == "++" else "-"
            add(Binding(name, s.start, "assign", Binary(op, Name(name), Num(1)), s))
            continue
        for name, type_, value, init, is_dim3 in _declaration(text) or ():
            kind = "decl" if value is not None or is_dim3 else "uninit"
            if is_dim3 and value is None and not init:
                value = Braced((Num(1), Num(1), Num(1)))
            add(Binding(name, s.start, kind, value, s, is_dim3, type_, init))
            designated = init[1:-1] if init.startswith("{") and init.endswith("}") else ""
            for part in split_top(designated) if designated else ():
                d = _DESIGNATED.match(part)
                if d:
                    member = dim3_value(parse(d.group("value")))
                    add(Binding(f"{name}.{d.group('field')}", s.start, "assign", member, s))
    return out


def _declaration(text: str):
    """[(name, type, value, initializer text, is dim3)] when `text` declares variables."""
    m = _DECL.match(text)
    if not m:
        return None
    type_ = " ".join(m.group("type").split())
    if type_.split()[0] in _NOT_TYPES or type_.split()[-1] in _NOT_TYPES:
        return None
    is_dim3 = type_.split()[-1] in ("dim3", "::dim3")
    found = []
    for part in split_top(m.group("rest")):
        d = _DECLARATOR.match(part)
        if not d:
            continue
        init = ""
        value: Expr | None = None
        if d.group("eq") is not None:
            init = d.group("eq").strip()
            value = parse(init) if not init.startswith("{") or is_dim3 else None
            if init.startswith("{") and not is_dim3:  # `int n = {256};`; an array's list stays text
                inner = parse(init[1:-1]) if init.endswith("}") else None
                value = inner if inner is not None and not isinstance(inner, Braced) else None
        elif d.group("paren") is not None:
            init = d.group("paren")
            value = parse(f"{type_.split()[-1]}({init})" if is_dim3 else init) if init.strip() else None
        elif d.group("brace") is not None:
            init = "{" + d.group("brace") + "}"
            value = parse(init) if is_dim3 else parse(d.group("brace") or "0")
        if is_dim3:
            value = dim3_value(value)
        found.append((d.group("name"), type_, value, init, is_dim3))
    return found


def _out_params(s: Statement, add) -> None:
    """`&x` passed to a call (not to a launch or an argument array): the call may write `x`."""
    for m in _CALL.finditer(s.text):
        callee = m.group(1)
        if callee.rpartition("::")[2] in _LAUNCH_CALLS:
            continue
        open_ = m.end() - 1
        close = matching(s.text, open_)
        if close < 0:
            continue
        for arg in split_top(s.text[open_ + 1 : close]):
            a = re.sub(r"^(?:\([^()]*\)\s*|reinterpret_cast\s*<[^<>]*>\s*\()", "", arg).strip()
            ref = re.match(r"^&\s*([A-Za-z_]\w*)\b", a)
            if ref:
                at = s.start + s.text.find(arg, open_)
                add(Binding(ref.group(1), at, "out", None, s, init_text=f"{callee}(...)"))
