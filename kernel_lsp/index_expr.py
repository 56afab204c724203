"""Index expressions as sums of products: `(b * M + row) * K + k` is b*M*K + row*K + k, which
says the buffer's strides. Parsed from C text without evaluating anything; a sub-expression that
is not a sum of products (a load `col_idx[j]`, a call, a division that is not exact) becomes an
atom, a symbol that holds its text. Parsing never raises: text it cannot read gives None."""

from __future__ import annotations

import re
from collections.abc import Mapping

Monomial = tuple[str, ...]  # sorted symbols, repeated for powers; () is the constant term
Poly = dict[Monomial, int]

ATOM = "@"  # prefix of a symbol that stands for a sub-expression that is not a sum of products
_TOKEN = re.compile(
    r"0[xX][0-9a-fA-F]+[uUlL]*|\d+\.\d*(?:[eE][-+]?\d+)?[fF]?|\d+[eE][-+]?\d+[fF]?|\d+[uUlL]*"
    r"|[A-Za-z_]\w*(?:\s*(?:\.|::|->)\s*[A-Za-z_]\w*)*|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--"
    r"|[-+*/%()\[\],?:<>&!~^|=]"
)
_TYPE_WORD = re.compile(
    r"const|volatile|unsigned|signed|int|long|short|char|float|double|bool|size_t|u?int(8|16|32|64)_t"
    r"|half|__half|__nv_bfloat16|auto|\*"
)


# --- sums of products ----------------------------------------------------------------------------


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
        if out[m] == 0:
            del out[m]
    return out


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
            if out[m] == 0:
                del out[m]
    return out


def const(value: int) -> Poly:
    return {(): value} if value else {}


def symbol(name: str) -> Poly:
    return {(name,): 1}


def poly_text(p: Poly, order: Mapping[str, int] | None = None) -> str:
    """A Python expression for a sum of products of sizes: `2 * d`, `rows + 1`, `B * T` (the
    factors in `order`, the kernel's parameter order, where given)."""
    if not p:
        return "0"
    rank = order or {}
    terms = []
    for m, c in sorted(p.items(), key=lambda mc: (-len(mc[0]), mc[0])):
        ordered = sorted(m, key=lambda s: (rank.get(s, len(rank)), s))
        factors = [s[len(ATOM) :].replace(",", ", ") if s.startswith(ATOM) else s for s in ordered]
        if c != 1 or not factors:
            factors = [str(abs(c)) if c != -1 or not factors else "", *factors]
            factors = [f for f in factors if f]
        text = " * ".join(factors) if factors else str(abs(c))
        terms.append(("- " if c < 0 else "+ ") + text)
    out = " ".join(terms)
    return out[2:] if out.startswith("+ ") else "-" + out[2:]


class _Parser:
    """A C expression as a sum of products; what is not one (a call, a load, a non-exact division)
    becomes an atom symbol holding its text."""

    def __init__(self, text: str, constants: Mapping[str, int]):
        text = re.sub(r"\bstatic_cast\s*<[^<>]*>\s*\(", "(", text)
        text = re.sub(r"(\w)\s*<[\w\s:,*]*>\s*\(", r"\1(", text)  # f<float>(x) -> f(x)
        self.tokens = [" ".join(t.split()).replace(" ", "") for t in _TOKEN.findall(text)]
        self.i = 0
        self.constants = constants

    def parse(self) -> Poly | None:
        try:
            p = self.expr()
        except (IndexError, ValueError):
            return None
        return p if self.i == len(self.tokens) else None

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self) -> str:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def expr(self) -> Poly:
        p = self.term()
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            p = add(p, self.term(), sign)
        return p

    def term(self) -> Poly:
        start = self.i
        p = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            q = self.unary()
            if op == "*":
                p = mul(p, q)
                continue
            divisor = q.get(()) if set(q) == {()} else None
            if op == "/" and divisor and all(c % divisor == 0 for c in p.values()):
                p = {m: c // divisor for m, c in p.items()}
            else:
                p = symbol(ATOM + "".join(self.tokens[start : self.i]))
        return p

    def unary(self) -> Poly:
        t = self.peek()
        if t == "-":
            self.take()
            return add({}, self.unary(), -1)
        if t == "+":
            self.take()
            return self.unary()
        if t in ("*", "&", "!", "~"):
            start = self.i
            self.take()
            self.unary()
            return symbol(ATOM + "".join(self.tokens[start : self.i]))
        if t == "(" and self._cast_ahead():
            while self.take() != ")":
                pass
            return self.unary()
        return self.postfix()

    def _cast_ahead(self) -> bool:
        j = self.i + 1
        words = []
        while j < len(self.tokens) and self.tokens[j] != ")":
            words.append(self.tokens[j])
            j += 1
        return bool(words) and all(_TYPE_WORD.fullmatch(w) for w in words)

    def postfix(self) -> Poly:
        start = self.i
        p = self.primary()
        while self.peek() in ("[", "("):
            self.take()
            depth = 1
            while depth:
                t = self.take()
                depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(t, 0) if t in "[]()" else 0
            p = symbol(ATOM + "".join(self.tokens[start : self.i]))
        if self.peek() in ("++", "--"):
            self.take()
        return p

    def primary(self) -> Poly:
        t = self.take()
        if t == "(":
            p = self.expr()
            if self.take() != ")":
                raise ValueError("unbalanced")
            return p
        if re.fullmatch(r"0[xX][0-9a-fA-F]+[uUlL]*", t):
            return const(int(re.sub(r"[uUlL]+$", "", t), 16))
        if re.fullmatch(r"\d+[uUlL]*", t):
            return const(int(re.sub(r"[uUlL]+$", "", t)))
        if re.fullmatch(r"[\d.]+.*", t):
            return symbol(ATOM + t)  # a floating literal: not an index
        if re.fullmatch(r"[A-Za-z_][\w.:>-]*", t):
            if t in self.constants:
                return const(self.constants[t])
            return symbol(t)
        raise ValueError(f"unexpected {t}")


def parse_index(text: str, constants: Mapping[str, int] | None = None) -> Poly | None:
    return _Parser(text, constants or {}).parse()


def divide(total: Poly, divisor: Poly) -> Poly | None:
    ((dm, dc),) = divisor.items()
    out: Poly = {}
    for m, c in total.items():
        rest = list(m)
        for s in dm:
            if s not in rest:
                return None
            rest.remove(s)
        if c % dc:
            return None
        out[tuple(rest)] = c // dc
    return out
