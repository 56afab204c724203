"""How a kernel's body uses its parameters, read from the text without compiling (for spec
skeletons). It finds where each buffer is indexed (also through local pointers such as
`const float* x = inp + row * C` and local variables such as `int i = (z * ny + y) * nx + x`), how
far each index runs (`i < n`, `row >= M` before a return, `for (k = 0; k < K; ...)`, and
`b = i / T`, `t = i % T` under `i < B * T`), and whether each buffer is read, written, read then
written, or accumulated atomically (in the kernel or in a `__device__` function it is passed to).

From the index expressions, expanded into sums of products, come shapes: `A[(b * M + row) * K + k]`
has strides M*K, K and 1, so it is (extent of b, M, K). An index nobody bounds (`blockIdx.x`), or
a gathered one (`x[col_idx[j]]`), leaves the outermost dimension open for the caller to name.
Reading never fails: what it cannot read it leaves out."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .index_expr import ATOM, Poly, add, const, divide, mul, parse_index, poly_text, symbol
from .lexer import arguments, blank_comments, matching, matching_back, parenthesized, split_top, top_level_end
from .source import KernelSignature

_BUILTINS = re.compile(r"^(threadIdx|blockIdx|blockDim|gridDim)\.[xyz]$")


# --- what a body says ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    param: str  # the kernel parameter (a local pointer's base)
    index: Poly | None  # the element offset from the parameter, None when unreadable
    mode: str  # read, write, update (read-modify-write), atomic
    pos: int


@dataclass
class Extent:
    """How far one dimension runs: a size expression, or why it is open."""

    text: str = ""  # "M", "rows + 1", "2 * d"
    open_var: str = ""  # an index nobody bounds (`blockIdx.x`, `token_idx`)
    gathered_from: str = ""  # indexed by values loaded from this parameter
    offsets_of: str = ""  # runs over the values of this offsets array (CSR row_ptr)

    @property
    def known(self) -> bool:
        return bool(self.text)


@dataclass
class BufferUse:
    dims: list[Extent] | None = None  # outermost first; None when no index was read
    reads: bool = False
    writes: bool = False
    updates: bool = False  # read before written, or a compound assignment
    atomic: bool = False
    gathers_into: list[tuple[str, int]] = field(default_factory=list)  # (buffer, dim) its values index
    offsets: bool = False  # a CSR-style offsets array: indexed at r and r + 1


@dataclass
class KernelUse:
    buffers: dict[str, BufferUse]
    sizes: set[str]  # the integer parameters the body uses as bounds or strides


@dataclass
class _Def:
    name: str
    rhs: str
    pos: int


def function_body(code: str, open_paren: int) -> tuple[str, int] | None:
    """(body, offset of the body) of the function whose parameter list opens at `open_paren`;
    None for a declaration."""
    close = matching(code, open_paren) if open_paren >= 0 else -1
    brace = code.find("{", close) if close >= 0 else -1
    if brace < 0 or ";" in code[close:brace]:
        return None
    end = matching(code, brace)
    return code[brace + 1 : end if end >= 0 else len(code)], brace + 1


def kernel_body(source: str, signature: KernelSignature) -> str:
    """The kernel's body, comments blanked; "" when it cannot be found (a declaration)."""
    code = blank_comments(source)
    lines = code.split("\n")
    if signature.line > len(lines):
        return ""
    start = sum(len(ln) + 1 for ln in lines[: signature.line - 1]) + signature.col - 1
    found = function_body(code, code.find("(", start))
    return found[0] if found else ""


def _statement_end(body: str, start: int, stop_at_comma: bool) -> int:
    return top_level_end(body, start, (";", ",") if stop_at_comma else ";")


def _closing(text: str, open_paren: int) -> int:
    """The index of the `)` that closes the `(` at `open_paren` (the end when there is none)."""
    close = matching(text, open_paren)
    return close if close >= 0 else len(text)


def _clauses(condition: str) -> list[str]:
    """`x < w && (y + j) < h` -> ["x < w", "(y + j) < h"]: the parts joined by && and || at the
    top level, each without a leading `!` or parentheses around the whole of it."""
    parts = split_top(condition, ("&&", "||"))
    out = []
    for part in parts:
        part = part.strip().lstrip("!").strip()
        while parenthesized(part):
            part = part[1:-1].strip()
        if re.search(r"&&|\|\|", part):
            out += _clauses(part)
        elif part:
            out.append(part)
    return out


_ASSIGN = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)")
_MUTATE = re.compile(r"([A-Za-z_]\w*)\s*(?:\+\+|--|[-+*/%&|^]=|<<=|>>=)|(?:\+\+|--)\s*([A-Za-z_]\w*)")
_CONDITION = re.compile(r"\b(if|while|for)\s*\(")
_COMPARE = re.compile(r"(<=|>=|(?<![<>-])<(?![<=])|(?<![<>-])>(?![>=]))")


class _Reader:
    def __init__(self, body: str, params: list[str], pointers: list[str], constants: Mapping[str, int]):
        self.body = body
        self.params = params
        self.pointers = set(pointers)
        self.constants = dict(constants)
        self.ints = [p for p in params if p not in self.pointers]
        self.order = {name: i for i, name in enumerate(params)}
        self.defs: dict[str, list[_Def]] = {}
        self.mutable: set[str] = set()
        self.derived: dict[str, list[tuple[int, str, str]]] = {}  # name -> (pos, base, offset text)
        self.bounds: dict[tuple, list[tuple[int, Extent]]] = {}  # an index sum -> (pos, extent)
        self._read_definitions()
        self.size_locals = self._size_locals()
        comparisons = self._comparisons()
        # A variable compared alone keeps its name (its bound is what gives a dimension).
        self.bounded = {
            side
            for left, _, right, _ in comparisons
            for side in (left, right)
            if re.fullmatch(r"[A-Za-z_]\w*", side)
            and side not in self.params
            and side not in self.size_locals
        }
        # `x >= 1 && x < nx - 1`: an interior range. Its lower bound bounds nothing above, and
        # the buffer it indexes spans nx (the neighbours at x - 1 and x + 1 are read too).
        self.lower = {
            left
            for left, op, right, _ in comparisons
            if op in (">=", ">") and re.fullmatch(r"[A-Za-z_]\w*", left) and re.fullmatch(r"\d+", right)
        } | {
            right
            for left, op, right, _ in comparisons
            if op in ("<=", "<") and re.fullmatch(r"[A-Za-z_]\w*", right) and re.fullmatch(r"\d+", left)
        }
        for left, op, right, pos in comparisons:
            self._bound_from(left, op, right, pos)
        self._division_bounds()

    # definitions and mutations
    def _read_definitions(self) -> None:
        for m in _ASSIGN.finditer(self.body):
            before = self.body[: m.start()].rstrip()
            if before.endswith(("[", ".", "->", "]")):
                continue
            end = _statement_end(self.body, m.end(), stop_at_comma=True)
            rhs = self.body[m.end() : end].strip()
            name = m.group(1)
            if name in self.params and name not in self.pointers:
                continue
            self.defs.setdefault(name, []).append(_Def(name, rhs, m.start()))
            base = self._pointer_base(rhs)
            if base is not None:
                self.derived.setdefault(name, []).append((m.start(), *base))
        for m in _MUTATE.finditer(self.body):
            self.mutable.add(m.group(1) or m.group(2))
        for m in re.finditer(r"\bfor\s*\(\s*(?:[\w:<>]+\s+)*([A-Za-z_]\w*)\s*=", self.body):
            self.mutable.add(m.group(1))

    def _size_locals(self) -> set[str]:
        """Locals that hold a size expression (`const int N = B * T * C`): substituted everywhere."""
        found: set[str] = set()
        for _ in range(4):
            for name, defs in self.defs.items():
                if len(defs) != 1 or name in self.mutable or name in self.derived or name in found:
                    continue
                p = parse_index(defs[0].rhs, self.constants)
                if p is not None and all(self.is_size_symbol(s) or s in found for m in p for s in m):
                    found.add(name)
        return found

    def _pointer_base(self, rhs: str) -> tuple[str, str] | None:
        """`inp + idx * C` -> ("inp", "idx * C") when inp is a pointer (a parameter or a local
        pointer); `&out[i]` -> ("out", "i")."""
        m = re.fullmatch(r"\(?\s*(?:\([^()]*\*\s*\)\s*)?&\s*([A-Za-z_]\w*)\s*\[(.*)\]\s*\)?", rhs, re.S)
        if m and (m.group(1) in self.pointers or m.group(1) in self.derived):
            return m.group(1), m.group(2)
        m = re.fullmatch(r"\(?\s*(?:\([^()]*\*\s*\)\s*)?([A-Za-z_]\w*)\s*\)?(?:\s*\+\s*(.+))?", rhs, re.S)
        if m and (m.group(1) in self.pointers or m.group(1) in self.derived):
            return m.group(1), m.group(2) or "0"
        return None

    def substitutable(self, name: str) -> bool:
        if name in self.size_locals:
            return True
        defs = self.defs.get(name, [])
        if len(defs) != 1 or name in self.mutable or name in self.derived or name in self.params:
            return False
        if name in self.bounded or _BUILTINS.match(defs[0].rhs.replace(" ", "")):
            return False  # `row = blockIdx.x` keeps its name: it may name an open dimension
        return not re.search(r"[/%]", re.sub(r"\[.*?\]", "", defs[0].rhs))  # `b = i / T` too

    def resolve(self, p: Poly | None, pos: int, depth: int = 0) -> Poly | None:
        """Local variables with one definition replaced by it, as long as that stays a sum of
        products (or loads: `ix = inp[b * T + t]` is the atom `@inp[...]`)."""
        if p is None or depth > 8:
            return p
        out: Poly = {}
        for m, c in p.items():
            term: Poly = const(c)
            for s in m:
                if not s.startswith(ATOM) and self.substitutable(s):
                    d = self.defs[s][0]
                    sub = self.resolve(parse_index(d.rhs, self.constants), d.pos, depth + 1)
                    term = mul(term, sub if sub is not None else symbol(s))
                else:
                    term = mul(term, symbol(s))
            out = add(out, term)
        return out

    # sizes and bounds
    def is_size_poly(self, p: Poly | None) -> bool:
        return p is not None and all(self.is_size_symbol(s) for m in p for s in m)

    def is_size_symbol(self, s: str) -> bool:
        if s in self.ints or s in getattr(self, "size_locals", ()):
            return True
        if s.startswith(ATOM):  # `@rot_dim/2`: a sub-expression of sizes
            names = re.findall(r"[A-Za-z_]\w*", s[len(ATOM) :])
            return bool(names) and all(n in self.ints for n in names)
        return False

    def _comparisons(self) -> list[tuple[str, str, str, int]]:
        texts = []
        for m in _CONDITION.finditer(self.body):
            close = _closing(self.body, m.end() - 1)
            inner = self.body[m.end() : close]
            if m.group(1) == "for":
                parts = inner.split(";")
                if len(parts) == 3:
                    texts.append((parts[1], m.end() + len(parts[0]) + 1))
            else:
                texts.append((inner, m.end()))
        for m in re.finditer(r"\)\s*\?", self.body):  # (i < n) ? a : b
            j = matching_back(self.body, m.start())
            texts.append((self.body[j + 1 : m.start()], j))
        # x = i < n ? a : b (no parentheses around the condition)
        for m in re.finditer(
            r"(?:(?<![=!<>])=|\breturn\b)\s*([^;?=(){}]*?(?:<|>|<=|>=)[^;?=(){}]*?)\?", self.body
        ):
            texts.append((m.group(1), m.start(1)))
        out = []
        for text, pos in texts:
            for clause in _clauses(text):
                parts = _COMPARE.split(clause, maxsplit=1)
                if len(parts) == 3:
                    out.append((parts[0].strip(), parts[1], parts[2].strip(), pos))
        return out

    def _bound_from(self, left: str, op: str, right: str, pos: int) -> None:
        """`i < n`, `i <= n - 1`, `n > i` and `i >= n` (before a return or an else) all say that
        i runs below n."""
        if op == ">":
            left, right, op = right, left, "<"
        elif op == ">=":
            if re.fullmatch(r"\d+", right.strip()):
                return  # `k >= 1`: a lower bound
            op = "<"
        index = self.resolve(parse_index(left, self.constants), pos)
        limit = self.resolve(parse_index(right, self.constants), pos)
        if index is None or limit is None or self.is_size_poly(index):
            return
        if left.strip() in self.lower and limit.get((), 0) < 0 and len(limit) > 1:
            limit = {m: c for m, c in limit.items() if m}  # `x < nx - 1` after `x >= 1`: nx
        if not self.is_size_poly(limit):
            offsets = self._offsets_bound(index, limit)
            if offsets:
                self._record(index, pos, Extent(offsets_of=offsets))
            return
        if op == "<=":
            limit = add(limit, const(1))
        constant = index.get((), 0)
        varying = {m: c for m, c in index.items() if m}
        self._record(varying, pos, Extent(text=self.text(add(limit, const(constant), -1))))

    def _offsets_bound(self, index: Poly, limit: Poly) -> str:
        """`j < row_ptr[row + 1]`: j runs over the values of row_ptr (an offsets array)."""
        if len(limit) == 1 and len(index) == 1:
            ((sym, *_),) = limit
            m = re.match(rf"{re.escape(ATOM)}([A-Za-z_]\w*)\[", sym)
            if m and m.group(1) in self.pointers:
                return m.group(1)
        return ""

    def _record(self, index: Poly, pos: int, extent: Extent) -> None:
        if index:
            entries = self.bounds.setdefault(tuple(sorted(index.items())), [])
            if all(p != pos for p, _ in entries):
                entries.append((pos, extent))
                entries.sort(key=lambda e: e[0])

    def bound(self, index: Poly, pos: int) -> Extent | None:
        """The bound in force at `pos`: the last one before it, else the first after."""
        entries = self.bounds.get(tuple(sorted(index.items())), [])
        if not entries:
            return None
        before = [e for p, e in entries if p <= pos]
        return before[-1] if before else entries[0][1]

    def text(self, p: Poly) -> str:
        return poly_text(p, self.order)

    def split_of(self, var: str) -> str | None:
        """D where the body takes `var / D` and `var % D` apart (a flat index over rows of D)."""
        for defs in self.defs.values():
            for d in defs:
                m = re.fullmatch(rf"\(?\s*{re.escape(var)}\s*\)?\s*[/%]\s*([A-Za-z_]\w*)", d.rhs)
                if m and self.is_size_symbol(m.group(1)):
                    return m.group(1)
        return None

    def extents(self) -> list[Extent]:
        return [e for entries in self.bounds.values() for _, e in entries]

    def _division_bounds(self) -> None:
        """`b = bt / T` under `bt < B * T` runs to B; `t = bt % T` to T."""
        for _ in range(3):
            for name, defs in self.defs.items():
                if len(defs) != 1 or name in self.mutable or self.bound(symbol(name), defs[0].pos):
                    continue
                m = re.fullmatch(r"\(?\s*([A-Za-z_]\w*)\s*\)?\s*([/%])\s*(.+)", defs[0].rhs, re.S)
                if not m:
                    continue
                divisor = self.resolve(parse_index(m.group(3), self.constants), defs[0].pos)
                if divisor is None or len(divisor) != 1 or not self.is_size_poly(divisor):
                    continue
                if m.group(2) == "%":
                    self._record(symbol(name), defs[0].pos, Extent(text=self.text(divisor)))
                    continue
                numerator = self.bound(symbol(m.group(1)), defs[0].pos)
                if numerator is None or not numerator.known:
                    continue
                total = parse_index(numerator.text, {})
                quotient = divide(total, divisor) if total else None
                if quotient is not None:
                    self._record(symbol(name), defs[0].pos, Extent(text=self.text(quotient)))

    # accesses
    def base_at(self, name: str, pos: int, depth: int = 0) -> tuple[str, Poly | None] | None:
        """(parameter, offset) a pointer name stands for at `pos`."""
        if name in self.params and name in self.pointers and name not in self.derived:
            return name, {}
        entries = [e for e in self.derived.get(name, []) if e[0] < pos]
        if not entries or depth > 6:
            return (name, {}) if name in self.pointers else None
        _, base, offset = entries[-1]
        found = self.base_at(base, entries[-1][0], depth + 1)
        if found is None:
            return None
        param, outer = found
        inner = self.resolve(parse_index(offset, self.constants), entries[-1][0])
        return param, (add(outer, inner) if outer is not None and inner is not None else None)

    def accesses(self, callee_modes) -> list[Access]:
        out: list[Access] = []
        names = sorted(self.pointers | set(self.derived), key=len, reverse=True)
        if not names:
            return out
        alternation = "|".join(re.escape(n) for n in names)
        for m in re.finditer(rf"(?<![\w.])({alternation})\s*\[", self.body):
            close = _statement_end(self.body, m.end(), stop_at_comma=False)
            found = self.base_at(m.group(1), m.start())
            if found is None:
                continue
            param, offset = found
            index = self.resolve(parse_index(self.body[m.end() : close], self.constants), m.start())
            total = add(offset, index) if offset is not None and index is not None else None
            out.append(Access(param, total, *self._mode_at(m.start(), close + 1)))
        for m in re.finditer(rf"(?<![\w.)\]])\*\s*({alternation})\b(?!\s*[\[(])", self.body):
            before = self.body[: m.start()].rstrip()
            if before and (before[-1].isalnum() or before[-1] in "_)]"):
                continue  # a multiplication
            found = self.base_at(m.group(1), m.start())
            if found is not None:
                out.append(Access(found[0], found[1], *self._mode_at(m.start(), m.end())))
        for m in re.finditer(
            rf"\b(atomic\w+|__ldg|__ldcs|__ldca|__ldlu|__ldcv)\s*\(\s*({alternation})\b", self.body
        ):
            close = _statement_end(self.body, m.end(2), stop_at_comma=True)
            found = self.base_at(m.group(2), m.start())
            if found is None:
                continue
            rest = self.body[m.end(2) : close].strip()
            extra = (
                parse_index(rest[1:], self.constants) if rest.startswith("+") else ({} if not rest else None)
            )
            index = self.resolve(extra, m.start())
            total = add(found[1], index) if found[1] is not None and index is not None else None
            mode = "atomic" if m.group(1).startswith("atomic") else "read"
            out.append(Access(found[0], total, mode, m.start()))
        out += callee_modes(self)
        return sorted(out, key=lambda a: a.pos)

    def _mode_at(self, start: int, after: int) -> tuple[str, int]:
        """(mode, position): a plain write happens at the end of its statement, after the reads
        on its right-hand side (`y[i] = a * x[i] + y[i]` reads y first)."""
        mode = self._mode(start, after)
        if mode == "write":
            return mode, _statement_end(self.body, after, stop_at_comma=False)
        return mode, start

    def _mode(self, start: int, after: int) -> str:
        before = self.body[:start].rstrip()
        if re.search(r"\batomic\w+\s*\(\s*&$", before):
            return "atomic"
        if before.endswith(("++", "--")):
            return "update"
        rest = self.body[after:].lstrip()
        if re.match(r"(?:\+\+|--|[-+*/%&|^]=|<<=|>>=)", rest):
            return "update"
        if re.match(r"=(?!=)", rest):
            return "write"
        return "read"


# --- shapes from index expressions ----------------------------------------------------------------


def _dims(reader: _Reader, access: Access) -> list[Extent] | None:
    """The dimensions one access reveals, outermost first (None when its index is not a sum of
    strided indices)."""
    index = access.index
    if index is None:
        return None
    constant = {m: c for m, c in index.items() if reader.is_size_poly({m: c})}
    varying = {m: c for m, c in index.items() if m not in constant}
    if not varying:  # `out[0]`, `x[m]`: the buffer reaches at least that element
        value = constant.get((), 0)
        if set(constant) <= {()}:
            return [Extent(text=str(value + 1))] if value >= 0 else None
        return [Extent(text=reader.text(add(constant, const(1))))]
    groups: dict[tuple, Poly] = {}  # stride -> the index sum at that stride
    for m, c in varying.items():
        idx = [s for s in m if not reader.is_size_symbol(s)]
        if len(idx) != 1:
            return None
        stride_syms = tuple(sorted(s for s in m if reader.is_size_symbol(s)))
        groups.setdefault((stride_syms, c), {})
        groups[(stride_syms, c)][(idx[0],)] = 1
    order = sorted(groups, key=lambda k: (len(k[0]), abs(k[1])))
    if list(groups) == [((), -1)]:
        return _reversed_extent(reader, groups[((), -1)], constant, access.pos)
    if order[0] != ((), 1):
        return None
    dims: list[Extent] = []
    for inner, outer in itertools.pairwise(order):
        quotient = divide({outer[0]: outer[1]}, {inner[0]: inner[1]})
        if quotient is None:
            return None
        dims.append(Extent(text=reader.text(quotient)))
    top = groups[order[-1]]
    extent = reader.bound(top, access.pos)
    if extent is None:
        extent = _open_extent(reader, top)
    elif extent.known and len(order) == 1 and constant.get((), 0) > 0 and set(constant) == {()}:
        extent = Extent(text=reader.text(add(parse_index(extent.text) or {}, const(constant[()]))))
    elif extent.known and len(order) == 1:
        # `idx < N * C` with `row = idx / C`, `col = idx % C`: rows of C, not one long run.
        (var,) = next(iter(top))
        total = parse_index(extent.text) or {}
        row = reader.split_of(var)
        rows = divide(total, symbol(row)) if row and len(total) == 1 else None
        if rows and row:
            return [Extent(text=reader.text(rows)), Extent(text=row)]
    dims.append(extent)
    return list(reversed(dims))


def _reversed_extent(reader: _Reader, top: Poly, constant: Poly, pos: int) -> list[Extent] | None:
    """`w[R - k]` for k from -R: indices from R - (last k) up to R - (first k)."""
    ((var,),) = top
    start = reader.defs.get(var, [])
    first = parse_index(start[0].rhs, reader.constants) if start else None
    if set(constant) <= {()} and first is not None and set(first) <= {()}:
        top_index = constant.get((), 0) - first.get((), 0)
        if top_index >= 0:
            return [Extent(text=str(top_index + 1))]
    return None


def _open_extent(reader: _Reader, top: Poly) -> Extent:
    (m,) = top if len(top) == 1 else ((),)
    sym = m[0] if m else ""
    load = re.match(rf"{re.escape(ATOM)}([A-Za-z_]\w*)\[", sym)
    if load and load.group(1) in reader.pointers:
        return Extent(gathered_from=load.group(1))
    modulo = re.fullmatch(rf"{re.escape(ATOM)}.+%(\w+)", sym)
    if modulo and (modulo.group(1).isdigit() or reader.is_size_symbol(modulo.group(1))):
        return Extent(text=modulo.group(1))  # `hist[i % 4]`
    return Extent(open_var=sym if re.fullmatch(r"[A-Za-z_][\w.]*", sym) else "")


def _best(options: list[list[Extent]]) -> list[Extent] | None:
    """The access that says most: the most dimensions, then the most known ones, then the largest
    1-D extent (`row_ptr[row + 1]` over `row_ptr[row]`)."""
    if not options:
        return None

    def rank(dims: list[Extent]) -> tuple:
        known = sum(d.known for d in dims)
        plus = dims[0].text.count("+") if len(dims) == 1 and dims[0].known else 0
        return (len(dims), known, plus)

    return max(options, key=rank)


def read_kernel(
    body: str, signature: KernelSignature, constants: Mapping[str, int] | None = None, source: str = ""
) -> KernelUse:
    """What `body` (comments blanked) does with each pointer parameter of `signature`."""
    params = [p.name for p in signature.params]
    pointers = [p.name for p in signature.params if p.is_pointer]
    reader = _Reader(body, params, pointers, constants or {})
    functions = device_functions(source) if source else {}

    def callee_modes(r: _Reader) -> list[Access]:
        return _callee_accesses(r, functions, constants or {})

    accesses = reader.accesses(callee_modes)
    buffers: dict[str, BufferUse] = {}
    for name in pointers:
        mine = [a for a in accesses if a.param == name]
        use = BufferUse()
        first_write = min((a.pos for a in mine if a.mode in ("write", "update", "atomic")), default=None)
        use.reads = any(a.mode in ("read", "update") for a in mine)
        use.writes = first_write is not None
        use.atomic = any(a.mode == "atomic" for a in mine)
        # Read before it is written: its value on entry matters (InOut). A buffer whose first
        # access is a plain write (`y[j] = e; ... y[j] *= inv`) reads back only what it wrote.
        first = min(mine, key=lambda a: a.pos) if mine else None
        use.updates = first_write is not None and first is not None and first.mode != "write"
        dims = [d for d in (_dims(reader, a) for a in mine) if d]
        use.dims = _best(dims)
        use.offsets = any(e.offsets_of == name for e in reader.extents())
        buffers[name] = use
    # Which buffers' values index others (`x[col_idx[j]]`: col_idx's values run over x's rows).
    for name, use in buffers.items():
        for i, dim in enumerate(use.dims or []):
            if dim.gathered_from in buffers:
                buffers[dim.gathered_from].gathers_into.append((name, i))
    sizes = {
        s
        for use in buffers.values()
        for dim in use.dims or []
        for s in re.findall(r"[A-Za-z_]\w*", dim.text)
        if s in reader.ints
    }
    for e in reader.extents():
        sizes |= {s for s in re.findall(r"[A-Za-z_]\w*", e.text) if s in reader.ints}
    return KernelUse(buffers, sizes)


# --- __device__ functions a buffer is passed to ---------------------------------------------------


@dataclass(frozen=True)
class DeviceFunction:
    name: str
    params: tuple[tuple[str, bool, bool], ...]  # (name, is pointer, is const pointer)
    body: str


def device_functions(source: str) -> dict[str, DeviceFunction]:
    """`__device__` functions of the file with a body, by name (the last of overloads)."""
    code = blank_comments(source)
    out: dict[str, DeviceFunction] = {}
    for m in re.finditer(r"__device__[^;{}()]*?\b([A-Za-z_]\w*)\s*\(", code):
        found = function_body(code, m.end() - 1)
        if not found:
            continue
        params = []
        for part in arguments(code, m.end() - 1):
            names = re.findall(r"[A-Za-z_]\w*", part.split("=")[0])
            if not names:
                continue
            ptr = "*" in part
            params.append((names[-1], ptr, ptr and bool(re.search(r"\bconst\b", part.split("*")[0]))))
        out[m.group(1)] = DeviceFunction(m.group(1), tuple(params), found[0])
    return out


def _callee_accesses(
    reader: _Reader, functions: Mapping[str, DeviceFunction], constants: Mapping[str, int], depth: int = 0
) -> list[Access]:
    """A buffer passed to a `__device__` function is read or written as that function does with
    its parameter (its shape is not followed)."""
    out: list[Access] = []
    if depth > 2 or not functions:
        return out
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;()]*>)?\s*\(", reader.body):
        fn = functions.get(m.group(1))
        if fn is None:
            continue
        for i, arg in enumerate(arguments(reader.body, m.end() - 1)):
            if i >= len(fn.params) or not fn.params[i][1]:
                continue
            head = re.match(r"\(?\s*&?\s*([A-Za-z_]\w*)", arg)
            if not head:
                continue
            found = reader.base_at(head.group(1), m.start())
            if found is None:
                continue
            pname, _, is_const = fn.params[i]
            if is_const:
                out.append(Access(found[0], None, "read", m.start()))
                continue
            inner = _Reader(fn.body, [p[0] for p in fn.params], [pname], constants)
            for k, a in enumerate(
                inner.accesses(lambda r: _callee_accesses(r, functions, constants, depth + 1))
            ):
                if a.param == pname:
                    out.append(Access(found[0], None, a.mode, m.start() + k))
    return out
