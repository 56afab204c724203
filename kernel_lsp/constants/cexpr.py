"""C integer constant expressions: a small parser, a partial evaluator and two renderers.

No `eval`: the text comes from the user's workspace. It reads what C and CUDA code writes in
sizes: integer and floating literals with their suffixes (`256u`, `1UL`, `0x100`, `1.0f`),
`+ - * / % << >> & | ^ ~ !`, comparisons, `&& ||`, `?:`, parentheses, casts (`(int)x`,
`static_cast<int>(x)`, `int(x)`), `sizeof` of basic types, `min`/`max` (`std::min<int>` too),
`ceil`, function-like macros and one-line helper functions (`Function`). Evaluation is partial:
names without a value stay names, so `(n + 255) / 256` with `n` unknown is an expression,
rendered as C or as a Python expression over the spec's sizes (`cdiv(n, 256)`). `//` is read as
floor division and a top-level comma list as a tuple, so the launch comments' Python expressions
(`cdiv(n, 256) // 2`, `(16, 16)`) go through the same parser. Nothing here raises on user text.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Guards against hostile or runaway text: a value past 2**64 is no launch size, shifts past
# 64 bits are not evaluated, expansion and nesting stop at these depths.
_LIMIT = 1 << 64
_MAX_DEPTH = 64
_MAX_TEXT = 4000

# --- expressions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Num(Expr):
    value: int | float


@dataclass(frozen=True)
class Name(Expr):
    name: str  # `n`, `grid.x`, `std::min`, `config.blockDim.x`


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-", "+", "~", "!", and "&", "*" (address and dereference: never a value)
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Cond(Expr):
    test: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Cast(Expr):
    type: str  # "int", "unsigned long", "float"
    operand: Expr


@dataclass(frozen=True)
class Braced(Expr):
    """`{16, 16, 1}` or a top-level tuple `(16, 16)`: a dim3's parts."""

    items: tuple[Expr, ...]


class ParseError(ValueError):
    pass


# --- tokens -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<float>(?:\d[\d']*\.[\d']*|\.\d[\d']*)(?:[eE][+-]?\d+)?[fFlL]?|\d[\d']*[eE][+-]?\d+[fFlL]?)
  | (?P<int>0[xX][0-9a-fA-F']+|0[bB][01']+|\d[\d']*)(?P<suffix>[uUlLzZ]*)\b
  | (?P<name>(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||//|::|->|[-+*/%&|^~!?:<>(),.\[\]{}])
    """,
    re.X,
)

INT_TYPES = {
    "int": 4,
    "unsigned": 4,
    "signed": 4,
    "short": 2,
    "long": 8,
    "char": 1,
    "bool": 1,
    "size_t": 8,
    "ssize_t": 8,
    "ptrdiff_t": 8,
    "int8_t": 1,
    "uint8_t": 1,
    "int16_t": 2,
    "uint16_t": 2,
    "int32_t": 4,
    "uint32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "uint": 4,
    "index_t": 8,
}
FLOAT_TYPES = {"float": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2, "nv_bfloat16": 2}
_VECTOR = re.compile(
    r"^(float|double|int|uint|char|uchar|short|ushort|long|ulong|half|__half|__nv_bfloat16)([1-4])$"
)
_TYPE_WORDS = set(INT_TYPES) | set(FLOAT_TYPES) | {"const", "volatile", "std", "unsigned", "signed", "void"}
_CASTS = ("static_cast", "reinterpret_cast", "const_cast")


def sizeof_type(text: str) -> int | None:
    """sizeof of a basic or vector type (`float`, `unsigned long long`, `float4`, `T*`); None
    for anything else (a struct, a template parameter)."""
    t = " ".join(re.sub(r"\b(const|volatile|std\s*::|struct)\b", " ", text).replace("std::", " ").split())
    if t.endswith("*"):
        return 8
    if t in ("long long", "unsigned long long", "long long int", "unsigned long long int", "long double"):
        return 16 if t == "long double" else 8
    words = [w for w in t.split() if w not in ("unsigned", "signed", "int")] or ["int"]
    if len(words) == 1:
        w = words[0]
        if w in INT_TYPES:
            return INT_TYPES[w]
        if w in FLOAT_TYPES:
            return FLOAT_TYPES[w]
        m = _VECTOR.match(w)
        if m:
            base = {"uint": "int", "uchar": "char", "ushort": "short", "ulong": "long"}.get(
                m.group(1), m.group(1)
            )
            size = INT_TYPES.get(base) or FLOAT_TYPES.get(base) or 0
            return size * int(m.group(2)) if size else None
    return None


def _is_type_name(words: list[str]) -> bool:
    """A parenthesised word list that is a cast's type: `int`, `unsigned long`, `size_t`, `float`."""
    return bool(words) and all(w in _TYPE_WORDS or w == "*" for w in words)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError(f"cannot read `{text[pos : pos + 10]}`")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "suffix" or m.group("int") is not None:
            out.append(("int", m.group("int") + (m.group("suffix") or "")))
        elif kind == "name":
            out.append(("name", re.sub(r"\s+", "", m.group(0))))
        else:
            out.append((kind or "op", m.group(0)))
    return out


def _int_literal(text: str) -> int:
    digits = text.rstrip("uUlLzZ").replace("'", "")
    if digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits.startswith("0"):
        return int(digits, 8)
    return int(digits)


_BINARY_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    ">": 7,
    "<=": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "//": 10,
    "%": 10,
}


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > _MAX_TEXT:
            raise ParseError("expression too long")
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ParseError(f"expected `{value}`, found `{tok[1] or 'the end'}`")
        if tok[0] == "end":
            raise ParseError("unexpected end")
        self.i += 1
        return tok

    def parse(self) -> Expr:
        e = self.top()
        if self.peek()[0] != "end":
            raise ParseError(f"unexpected `{self.peek()[1]}`")
        return e

    def top(self) -> Expr:
        """A comma list at top level is a tuple (a launch comment's `(16, 16)` without parens)."""
        items = [self.expr()]
        while self.peek()[1] == ",":
            self.take()
            items.append(self.expr())
        return items[0] if len(items) == 1 else Braced(tuple(items))

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise ParseError("expression nested too deeply")
        try:
            test = self.binary(1)
            if self.peek()[1] == "?":
                self.take()
                then = self.expr()
                self.take(":")
                return Cond(test, then, self.expr())
            return test
        finally:
            self.depth -= 1

    def binary(self, level: int) -> Expr:
        left = self.unary()
        while True:
            kind, op = self.peek()
            prec = _BINARY_PRECEDENCE.get(op) if kind == "op" else None
            if prec is None or prec < level:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = Binary(op, left, right)

    def unary(self) -> Expr:
        kind, tok = self.peek()
        if kind == "op" and tok in ("-", "+", "~", "!", "&", "*"):
            self.take()
            return Unary(tok, self.unary())
        if kind == "op" and tok == "(":
            cast = self._cast_type()
            if cast is not None:
                return Cast(cast, self.unary())
        if kind == "name" and tok == "sizeof":
            self.take()
            self.take("(")
            start = self.i
            depth = 1
            while depth:
                k, v = self.take()
                depth += {"(": 1, ")": -1}.get(v, 0) if k == "op" else 0
            text = " ".join(v for _, v in self.toks[start : self.i - 1])
            size = sizeof_type(text)
            return Num(size) if size is not None else Call("sizeof", (Name(text.replace(" ", "")),))
        return self.postfix()

    def _cast_type(self) -> str | None:
        """`(int)`, `(unsigned long)`, `(size_t)`: a cast when the parenthesised words are all type
        words and an operand follows."""
        j, words = 1, []
        while self.peek(j)[0] in ("name", "op") and self.peek(j)[1] not in (")", "(", "end"):
            k, v = self.peek(j)
            if k == "op" and v != "*":
                return None
            words.append(v)
            j += 1
        if self.peek(j)[1] != ")" or not _is_type_name([w.replace("std::", "") for w in words]):
            return None
        nk, nv = self.peek(j + 1)
        if nk == "end" or (nk == "op" and nv not in ("(", "-", "+", "~", "!", "&", "*")):
            return None
        self.i += j + 1
        return " ".join(w for w in words if w not in ("const", "volatile"))

    def postfix(self) -> Expr:
        kind, tok = self.take()
        if kind == "int":
            e: Expr = Num(_int_literal(tok))
        elif kind == "float":
            e = Num(float(tok.rstrip("fFlL").replace("'", "")))
        elif kind == "name":
            e = self._named(tok)
        elif tok == "(":
            e = self.top()
            self.take(")")
        elif tok == "{":
            items = []
            while self.peek()[1] != "}":
                items.append(self.expr())
                if self.peek()[1] == ",":
                    self.take()
            self.take("}")
            e = Braced(tuple(items))
        else:
            raise ParseError(f"unexpected `{tok}`")
        while self.peek()[1] in (".", "->", "[") and isinstance(e, Name):
            op = self.take()[1]
            if op == "[":
                index = self.expr()
                self.take("]")
                e = Call("[]", (e, index))
                break
            member = self.take()
            if member[0] != "name":
                raise ParseError(f"expected a member name after `{op}`")
            e = Name(f"{e.name}.{member[1]}")
            if self.peek()[1] == "(":
                e = Call(e.name, self._args())
        return e

    def _named(self, name: str) -> Expr:
        if name in _CASTS or name.endswith(tuple("::" + c for c in _CASTS)):
            self.take("<")
            words = []
            while self.peek()[1] != ">":
                words.append(self.take()[1])
            self.take(">")
            self.take("(")
            operand = self.expr()
            self.take(")")
            return Cast(" ".join(w for w in words if w not in ("const", "volatile")), operand)
        # `std::min<int>(a, b)`: template arguments of a call are types here; skip them.
        if self.peek()[1] == "<" and self._template_call_ahead():
            while self.take()[1] != ">":
                pass
        if self.peek()[1] == "{":  # `dim3{4, 4}`: list initialisation is a call too
            self.take()
            items = []
            while self.peek()[1] != "}":
                items.append(self.expr())
                if self.peek()[1] == ",":
                    self.take()
                elif self.peek()[1] != "}":
                    raise ParseError(f"unexpected `{self.peek()[1]}` in a list")
            self.take("}")
            return Call(name, tuple(items))
        if self.peek()[1] == "(":
            args = self._args()
            base = name.replace("std::", "")
            if base in INT_TYPES or base in FLOAT_TYPES:  # functional cast `int(x)`
                return Cast(base, args[0]) if len(args) == 1 else Call(name, args)
            return Call(name, args)
        return Name(name)

    def _template_call_ahead(self) -> bool:
        j = 1
        while self.peek(j)[0] == "name" or self.peek(j)[1] in ("*", "::", ","):
            j += 1
        return self.peek(j)[1] == ">" and self.peek(j + 1)[1] == "("

    def _args(self) -> tuple[Expr, ...]:
        self.take("(")
        args = []
        while self.peek()[1] != ")":
            args.append(self.expr())
            if self.peek()[1] == ",":
                self.take()
            elif self.peek()[1] != ")":
                raise ParseError(f"unexpected `{self.peek()[1]}` in a call")
        self.take(")")
        return tuple(args)


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Expr | None:
    """The expression `text`, or None when it is not one this evaluator reads (expressions are
    immutable: one parse per text is shared)."""
    try:
        return _Parser(text).parse()
    except (ParseError, RecursionError, ValueError, IndexError):
        return None


def int_value(e: Expr | None) -> int | tuple[int, ...] | None:
    """An integer (or a tuple of them) when `e` is one; integral floats count (`ceil` gives them)."""
    if isinstance(e, Num) and isinstance(e.value, int):
        return e.value
    if isinstance(e, Num) and isinstance(e.value, float) and e.value.is_integer():
        return int(e.value)
    if isinstance(e, Braced):
        items = [int_value(x) for x in e.items]
        ints = [x for x in items if isinstance(x, int)]
        if len(ints) == len(items):
            return tuple(ints)
    return None


# --- evaluation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Function:
    """A function-like macro or a one-line helper (`return (a + b - 1) / b;`)."""

    params: tuple[str, ...]
    body: Expr


Lookup = Callable[[str], "Expr | None"]


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _arith(op: str, a: int | float, b: int | float) -> int | float | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "//", "%"):
        if b == 0:
            return None
        if op == "//":
            return a // b
        if op == "/":
            return _c_div(a, b) if isinstance(a, int) and isinstance(b, int) else a / b
        return a - _c_div(a, b) * b if isinstance(a, int) and isinstance(b, int) else math.fmod(a, b)
    if op in ("<", ">", "<=", ">=", "==", "!="):
        return int({"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b, "!=": a != b}[op])
    if op in ("&&", "||"):
        return int(bool(a) and bool(b)) if op == "&&" else int(bool(a) or bool(b))
    if not isinstance(a, int) or not isinstance(b, int):
        return None
    if op in ("<<", ">>"):
        if not 0 <= b <= 64:
            return None
        return a << b if op == "<<" else a >> b
    return {"&": a & b, "|": a | b, "^": a ^ b}.get(op)


def _cast(type_: str, v: int | float) -> int | float:
    words = type_.replace("std::", "").split()
    if any(w in FLOAT_TYPES for w in words):
        return float(v)
    if "*" in type_:
        return v
    v = int(v)  # truncation toward zero, as C converts
    size = INT_TYPES.get(words[-1], 4) if words else 4
    if "unsigned" in words or (words and words[-1].startswith("uint")) or words == ["size_t"]:
        return v % (1 << (8 * size))
    return v


class Evaluator:
    """Partial evaluation under `lookup` (a name's expression, or None to keep the name) and the
    `functions` (macros, helpers) of the file."""

    def __init__(self, lookup: Lookup | None = None, functions: Mapping[str, Function] | None = None):
        self.lookup = lookup or (lambda _name: None)
        self.functions = functions or {}
        self.depth = 0

    def simplify(self, e: Expr) -> Expr:
        self.depth += 1
        try:
            if self.depth > _MAX_DEPTH:
                return e
            return self._simplify(e)
        finally:
            self.depth -= 1

    def _simplify(self, e: Expr) -> Expr:
        if isinstance(e, Num):
            return e if abs(e.value) < _LIMIT else Name("<overflow>")
        if isinstance(e, Name):
            bound = self.lookup(e.name)
            return e if bound is None or bound == e else self.simplify(bound)
        if isinstance(e, Braced):
            return Braced(tuple(self.simplify(x) for x in e.items))
        if isinstance(e, Cast):
            inner = self.simplify(e.operand)
            if isinstance(inner, Num):
                return Num(_cast(e.type, inner.value))
            return Cast(e.type, inner)
        if isinstance(e, Unary):
            inner = self.simplify(e.operand)
            if isinstance(inner, Num):
                v = inner.value
                if e.op == "-":
                    return Num(-v)
                if e.op == "+":
                    return inner
                if e.op == "!":
                    return Num(int(not v))
                if e.op == "~" and isinstance(v, int):
                    return Num(~v)
            return Unary(e.op, inner)
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Cond):
            test = self.simplify(e.test)
            if isinstance(test, Num):
                return self.simplify(e.then if test.value else e.other)
            then, other = self.simplify(e.then), self.simplify(e.other)
            return then if then == other else Cond(test, then, other)
        if isinstance(e, Call):
            return self._call(e)
        return e

    def _binary(self, e: Binary) -> Expr:
        left = self.simplify(e.left)
        if e.op in ("&&", "||") and isinstance(left, Num):  # short circuit
            if bool(left.value) == (e.op == "||"):
                return Num(int(bool(left.value)))
            right = self.simplify(e.right)
            return Num(int(bool(right.value))) if isinstance(right, Num) else Binary("!=", right, Num(0))
        right = self.simplify(e.right)
        if isinstance(left, Num) and isinstance(right, Num):
            v = _arith(e.op, left.value, right.value)
            if v is not None and abs(v) < _LIMIT:
                return Num(v)
            return Binary(e.op, left, right)
        return _fold_sum(Binary(e.op, left, right))

    def _call(self, e: Call) -> Expr:
        base = e.func.replace("std::", "").replace("::", "")
        fn = self.functions.get(e.func) or self.functions.get(base)
        if fn is not None and len(fn.params) == len(e.args):
            bound = dict(zip(fn.params, (self.simplify(a) for a in e.args), strict=True))
            outer = self.lookup
            inner = Evaluator(lambda n: bound.get(n) if n in bound else outer(n), self.functions)
            inner.depth = self.depth
            return inner.simplify(fn.body)
        args = tuple(self.simplify(a) for a in e.args)
        if base in ("min", "max", "fminf", "fmaxf", "fmin", "fmax") and len(args) == 2:
            values = [a.value for a in args if isinstance(a, Num)]
            if len(values) == len(args):
                return Num(min(values) if base in ("min", "fminf", "fmin") else max(values))
            return Call(base.replace("fmin", "min").replace("fmax", "max").rstrip("f"), args)
        if base == "cdiv" and len(args) == 2:
            return self._binary(Binary("/", Binary("-", Binary("+", args[0], args[1]), Num(1)), args[1]))
        if base in ("ceil", "ceilf", "floor", "floorf") and len(args) == 1:
            (x,) = args
            if isinstance(x, Num):
                return Num(float(math.ceil(x.value) if base.startswith("ceil") else math.floor(x.value)))
            num_den = _float_division(x)
            if num_den and base.startswith("ceil"):  # ceil(n / 256.0) is cdiv(n, 256)
                return self._binary(
                    Binary("/", Binary("+", num_den[0], Binary("-", num_den[1], Num(1))), num_den[1])
                )
            if num_den:
                return self._binary(Binary("/", *num_den))
        if base == "abs" and len(args) == 1 and isinstance(args[0], Num):
            return Num(abs(args[0].value))
        return Call(e.func, args)


def _float_division(e: Expr) -> tuple[Expr, Expr] | None:
    """`(float)n / 256` or `n / 256.0f` as (n, 256) when both sides are integers but for the
    conversion to float that makes the division exact."""
    if not (isinstance(e, Binary) and e.op == "/"):
        return None

    def strip(x: Expr) -> tuple[Expr, bool]:
        if isinstance(x, Cast) and x.type in FLOAT_TYPES:
            return x.operand, True
        if isinstance(x, Num) and isinstance(x.value, float) and x.value.is_integer():
            return Num(int(x.value)), True
        return x, False

    (a, fa), (b, fb) = strip(e.left), strip(e.right)
    return (a, b) if fa or fb else None


def _terms(e: Expr, sign: int = 1) -> list[tuple[int, Expr]]:
    if isinstance(e, Binary) and e.op in ("+", "-"):
        return _terms(e.left, sign) + _terms(e.right, sign if e.op == "+" else -sign)
    return [(sign, e)]


def _fold_sum(e: Expr) -> Expr:
    """`n + 256 - 1` -> `n + 255`: the integer parts of a sum gathered into one."""
    if not (isinstance(e, Binary) and e.op in ("+", "-")):
        return e
    terms = _terms(e)
    ints = [s * t.value for s, t in terms if isinstance(t, Num) and isinstance(t.value, int)]
    if not ints:
        return e
    rest = [(s, t) for s, t in terms if not (isinstance(t, Num) and isinstance(t.value, int))]
    constant = sum(ints)
    if not rest:
        return Num(constant)
    if constant:
        rest.append((1 if constant > 0 else -1, Num(abs(constant))))
    return _sum(rest)


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Unary, Cast)):
        return (e.operand,)
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, Cond):
        return (e.test, e.then, e.other)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Braced):
        return e.items
    return ()


def walk(e: Expr) -> list[Expr]:
    """`e` and every expression inside it, parents first."""
    out, todo = [], [e]
    while todo:
        x = todo.pop()
        out.append(x)
        todo.extend(reversed(children(x)))
    return out


def names_and_calls(e: Expr) -> tuple[list[str], list[str]]:
    """(free_names(e), the functions `e` still calls after evaluation) in one walk."""
    names: dict[str, None] = {}
    calls: dict[str, None] = {}
    todo = [e]
    while todo:
        x = todo.pop()
        if isinstance(x, Num):
            continue
        if isinstance(x, Name):
            names[x.name] = None
            continue
        if isinstance(x, Call) and x.func not in ("min", "max"):
            calls[x.func] = None
        todo.extend(reversed(children(x)))
    return list(names), list(calls)


def free_names(e: Expr) -> list[str]:
    """The names left in `e`, in order, each once (function names of calls not included)."""
    return names_and_calls(e)[0]


def rename(e: Expr, names: Mapping[str, str]) -> Expr:
    """`e` with names replaced (a launcher's `N` by the kernel parameter `n` it is passed as)."""
    return Evaluator(lambda n: Name(names[n]) if n in names and names[n] != n else None).simplify(e)


# --- rendering ----------------------------------------------------------------------------------

_PY_OPS = {"&&": "and", "||": "or"}


def _as_cdiv(e: Binary) -> tuple[Expr, Expr] | None:
    """(a, b) when `e` is `(a + b - 1) / b`, however the sum was folded."""
    if e.op not in ("/", "//"):
        return None
    b = e.right
    terms = _terms(e.left)
    if isinstance(b, Num) and isinstance(b.value, int) and b.value > 1:
        consts = [s * t.value for s, t in terms if isinstance(t, Num)]
        rest = [(s, t) for s, t in terms if not isinstance(t, Num)]
        if sum(consts) == b.value - 1 and rest:
            return _sum(rest), b
        return None
    plus_b = [i for i, (s, t) in enumerate(terms) if s > 0 and t == b]
    minus_one = [i for i, (s, t) in enumerate(terms) if s < 0 and t == Num(1)]
    if plus_b and minus_one:
        rest = [x for i, x in enumerate(terms) if i not in (plus_b[0], minus_one[0])]
        if rest:
            return _sum(rest), b
    return None


def _sum(terms: list[tuple[int, Expr]]) -> Expr:
    out: Expr | None = None
    for s, t in terms:
        out = (t if s > 0 else Unary("-", t)) if out is None else Binary("+" if s > 0 else "-", out, t)
    return out or Num(0)


# Python orders comparisons below `& | ^` (C the other way round): operands of those are always
# parenthesised in Python.
_PY_GROUPED = frozenset({"&", "|", "^", "==", "!=", "<", ">", "<=", ">=", "&&", "||"})


def to_python(e: Expr) -> str:
    """A Python expression over the spec's sizes (the launch comment's language): `/` is `//`
    (sizes are not negative), `(a + b - 1) / b` is `cdiv(a, b)`, `?:` is `x if c else y`."""
    return _render(e, python=True)


def to_c(e: Expr) -> str:
    return _render(e, python=False)


def _render(e: Expr, python: bool, parent: int = 0) -> str:
    r = lambda x, p=0: _render(x, python, p)  # noqa: E731
    if isinstance(e, Num):
        v = e.value
        return repr(v) if isinstance(v, float) else str(v)
    if isinstance(e, Name):
        return e.name
    if isinstance(e, Braced):
        items = ", ".join(r(x) for x in e.items)
        return f"({items})" if python else "{" + items + "}"
    if isinstance(e, Cast):
        if python:
            return f"int({r(e.operand)})" if e.type.split()[-1] in INT_TYPES else r(e.operand, 11)
        return f"({e.type}){r(e.operand, 11)}"
    if isinstance(e, Unary):
        if python and e.op == "!":
            text = f"not {r(e.operand, 11)}"
            return f"({text})" if parent else text
        return f"{e.op}{r(e.operand, 11)}"
    if isinstance(e, Cond):
        text = (
            f"{r(e.then, 1)} if {r(e.test, 1)} else {r(e.other, 1)}"
            if python
            else f"{r(e.test, 1)} ? {r(e.then, 1)} : {r(e.other, 1)}"
        )
        return f"({text})" if parent else text
    if isinstance(e, Call):
        if e.func == "[]" and len(e.args) == 2:
            return f"{r(e.args[0], 12)}[{r(e.args[1])}]"
        return f"{e.func}({', '.join(r(a) for a in e.args)})"
    if isinstance(e, Binary):
        if python:
            cdiv = _as_cdiv(e)
            if cdiv:
                return f"cdiv({r(cdiv[0])}, {r(cdiv[1])})"
        prec = _BINARY_PRECEDENCE.get(e.op, 0)
        op = ("//" if e.op == "/" else _PY_OPS.get(e.op, e.op)) if python else e.op.replace("//", "/")
        inner = 100 if python and e.op in _PY_GROUPED else prec
        text = f"{r(e.left, inner)} {op} {r(e.right, max(inner, prec + 1))}"
        return f"({text})" if parent > prec else text
    return "?"
