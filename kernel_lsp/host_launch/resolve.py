"""Names at a point of a host function -> expressions over the function's parameters.

A name read by a launch is looked up as C would see it there: the last declaration or assignment
before the launch in a block around it, else a parameter of the function, else a constant of the
file (macros are expanded where they are used, so a macro over a local reads that local). What
cannot be followed becomes an opaque marker whose cause is kept in words ("a runtime value read
from argv (line 12: `int threads = atoi(argv[1])`)"), so that every unresolved quantity says why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..constants import Constants
from ..constants.cexpr import (
    Braced,
    Call,
    Evaluator,
    Expr,
    Name,
    Num,
    free_names,
    int_value,
    names_and_calls,
    parse,
    rename,
    to_c,
    walk,
)
from .model import Quantity
from .scan import Binding, FunctionSpan, Lines, Statement

_MAX_DEPTH = 40
PARAM = "$"  # a parameter of the launcher, kept as a symbol
OPAQUE = "?"  # a marker for what cannot be followed; its cause is in `Resolver.causes`


@dataclass(frozen=True)
class Place:
    """Where a name is read: an offset, and the blocks around it."""

    offset: int
    blocks: tuple[int, ...]


class Resolver:
    def __init__(
        self,
        constants: Constants,
        lines: Lines,
        function: FunctionSpan | None = None,
        binds: dict[str, list[Binding]] | None = None,
        macro: str = "",
        macro_params: tuple[str, ...] = (),
        parent: tuple[Resolver, Place] | None = None,
        line_of: Callable[[int], int] | None = None,
    ) -> None:
        self.constants = constants
        self.lines = lines
        self.function = function
        self.binds = binds or {}
        self.macro = macro
        self.macro_params = macro_params
        self.params = {p.name: p for p in function.params} if function else {}
        # Names passed to the kernel as scalar arguments -> the kernel's parameter: while set, a
        # launch reads as an expression over the kernel's parameters (what a kernel spec sizes).
        # A constant passed to the kernel (`int numElements = 50000;`) stays a symbol in a grid,
        # which covers the kernel's size, but not in a block (`threads` passed along stays 256).
        self.stops: dict[str, str] = parent[0].stops if parent else {}
        self.stop_constants = False
        # A macro's body expanded in a function: names it does not bind are the function's at the
        # macro's use. Both share the causes, so markers from either explain themselves.
        self.parent = parent
        self.causes: dict[str, str] = parent[0].causes if parent else {}
        # An expanded macro's statements are all at the line of its use.
        self.line_of = line_of or lines.line
        self._seen: dict[tuple, Expr] = {}

    # --- expressions ----------------------------------------------------------------------------

    def expr(self, e: Expr, at: Place, depth: int = 0) -> Expr:
        """`e` with every name replaced by what it is at `at`: only parameter symbols and
        opaque markers remain."""

        def lookup(n: str) -> Expr | None:
            if n.startswith((PARAM, OPAQUE)):
                return None
            return self.name(n, at, depth + 1)

        return Evaluator(lookup, self.constants.all_functions()).simplify(e)

    def text(self, text: str, at: Place) -> Expr:
        parsed = parse(text)
        if parsed is None:
            return self._opaque(f"`{' '.join(text.split())}`, which kernel-lsp cannot read")
        return self.expr(parsed, at)

    def _opaque(self, cause: str) -> Name:
        marker = f"{OPAQUE}{len(self.causes)}"
        self.causes[marker] = cause
        return Name(marker)

    # --- names ----------------------------------------------------------------------------------

    def name(self, n: str, at: Place, depth: int = 0) -> Expr:
        """What `n` is at `at` (remembered: a launch's grid and block read the same names)."""
        key = (n, at, self.stop_constants, tuple(self.stops.items()))
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = self._name(n, at, depth)
        return found

    def _name(self, n: str, at: Place, depth: int) -> Expr:
        if depth > _MAX_DEPTH:
            return self._opaque(f"`{n}`, defined through too many steps")
        if n in ("argc", "argv") or n.startswith("argv."):
            return self._opaque("a runtime value read from argv")
        found = self._binding(n, at)
        full = self._opaque(found) if isinstance(found, str) else self._plain(n, found, at, depth)
        if n in self.stops and (self.stop_constants or int_value(full) is None):
            return Name(PARAM + self.stops[n])
        return full

    def _plain(self, n: str, found: Binding | None, at: Place, depth: int) -> Expr:
        if found is not None:
            return self._bound(n, found, depth)
        if self.parent is not None:
            self.parent[0].stop_constants = self.stop_constants
            return self.parent[0].name(n, self.parent[1], depth + 1)
        root = n.split(".")[0]
        fn = self.function
        if root in self.params:
            if root == n:
                return Name(PARAM + n)
            member = self._static_member(self.params[root].base_type, n[len(root) + 1 :])
            if member is not None:
                return self._constant(n, *member, at, depth)
            of = f" of `{fn.name}`" if fn is not None else ""
            return self._opaque(f"`{n}`, a member of the parameter `{root}`{of}")
        if fn is not None and root in fn.template_params:
            return self._opaque(f"`{root}`, a template parameter of `{fn.name}`")
        if root in self.macro_params:
            return self._opaque(f"`{root}`, a parameter of macro `{self.macro}`")
        constant = self.constants.find(n)  # the file's constants, then its headers'
        if constant is not None:
            return self._constant(n, *constant, at, depth)
        where = f"a local of `{fn.name}`, one of its parameters" if fn else "a parameter of the macro"
        headers = " or of the headers it includes" if self.constants.has_headers else ""
        return self._opaque(f"`{n}`, which is neither {where} nor a constant of this file{headers}")

    def _constant(self, n: str, owner: Constants, key: str, at: Place, depth: int) -> Expr:
        text = owner.text(key)
        inside = f" (in {os.path.basename(owner.origin)})" if owner.origin else ""
        if owner.kinds.get(key) in ("macro", "-D"):  # textual: evaluated where it is used
            parsed = parse(text)
            if parsed is None:
                return self._opaque(f"macro `{n}` (`{text}`){inside}, which kernel-lsp cannot read")
            return self.expr(parsed, at, depth + 1)
        value = owner.expression(key)
        if value is not None:
            return value
        return self._opaque(f"constant `{n}` (`{text}`){inside}, which kernel-lsp cannot evaluate")

    def _static_member(self, type_text: str, member: str) -> tuple[Constants, str] | None:
        """(owner, key) of `Type::member` when `type_text` names a class (`const Config&`,
        `tk::Cfg`) with a static constant `member` (one name, not a path)."""
        if not member or not re.fullmatch(r"[A-Za-z_]\w*", member):
            return None
        words = re.sub(
            r"\b(?:const|constexpr|static|volatile|struct|class|typename)\b|[*&]", " ", type_text
        ).split()
        if len(words) != 1 or not re.fullmatch(r"(?:::)?[A-Za-z_][\w:]*", words[0]):
            return None
        return self.constants.find(f"{words[0]}::{member}")

    def _binding(self, n: str, at: Place) -> Binding | str | None:
        """The binding a read of `n` at `at` sees (of `n` or of a prefix: `grid` for `grid.x`),
        None when there is none, or why it cannot be known (set in several branches)."""
        parts = n.split(".")
        keys = [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
        seen = [b for k in keys for b in self.binds.get(k, ()) if b.offset < at.offset]
        if not seen:
            return None
        # At one offset (`cfg = {.gridDim = g}`), the field's own binding is the later one.
        seen.sort(key=lambda b: (b.offset, len(b.name)))
        certain = [b for b in seen if self._certain(b, at)]
        last = certain[-1] if certain else None
        later = [b for b in seen if b not in certain and (last is None or b.offset > last.offset)]
        # An `&x` handed to a call in a branch, or an assignment in one: either may have run.
        later = [b for b in later if b.kind != "loop"]
        if later:
            options = ([last] if last else []) + later
            shown = ", ".join(
                f"line {self.line_of(b.offset)}: `{self.shown(b.statement)}`" for b in options[:4]
            )
            return f"`{n}`, set in several places before the launch ({shown})"
        return last

    def shown(self, s: Statement) -> str:
        """A statement as the user wrote it (strings included), shortened."""
        text = s.text
        if self.macro == "" and self.lines.text[s.start : s.start + len(text)].strip():
            text = self.lines.text[s.start : s.start + len(text)]
        return _short(text)

    @staticmethod
    def _certain(b: Binding, at: Place) -> bool:
        """`b` runs on every path to `at`: its block holds `at` and it is not a braceless branch."""
        return not b.statement.conditional and at.blocks[: len(b.statement.blocks)] == b.statement.blocks

    def _bound(self, n: str, b: Binding, depth: int) -> Expr:
        line = self.line_of(b.offset)
        inside = f", in macro `{self.macro}`" if self.macro else ""
        where = f"line {line}{inside}: `{self.shown(b.statement)}`"
        if b.kind == "loop":
            return self._opaque(f"`{b.name}`, the variable of the loop at line {line}")
        if b.kind == "out":
            return self._opaque(f"`{b.name}`, set at run time by `{b.init_text}` ({where})")
        if b.kind == "uninit":
            if b.type.endswith("cudaLaunchConfig_t") and n != b.name:
                return Num(0) if n.endswith("dynamicSmemBytes") else self._opaque(f"`{n}`, never set")
            return self._opaque(f"`{b.name}`, declared without a value ({where})")
        value = b.value
        if value is None:
            return self._opaque(f"`{b.name}` ({where}), which kernel-lsp cannot read")
        if n != b.name:
            suffix = n[len(b.name) + 1 :]
            # `cfg.kThreads` with `Config cfg{};`: a static constexpr member, the same in every
            # object (before the zero-initialised rule below: it is no field of the object).
            member = self._static_member(b.type, suffix)
            if member is not None:
                return self._constant(n, *member, Place(b.offset, b.statement.blocks), depth + 1)
            if (
                b.init_text.strip() in ("{0}", "{}", "{ 0 }")
                and not isinstance(value, Braced)
                and re.search(r"\b(?:cuda|CU)\w*$", b.type.strip())
            ):
                # A zero-initialised C struct of CUDA's (cudaLaunchConfig_t config = {0};); a
                # C++ class's `{}` keeps its members' own initialisers, unknown here.
                return Num(0)
            if isinstance(value, Braced) and suffix in ("x", "y", "z"):
                value = value.items["xyz".index(suffix)]
            elif (
                isinstance(value, Name)
                and not value.name.startswith((PARAM, OPAQUE))
                and self.is_dim3(value.name, Place(b.offset, b.statement.blocks))
            ):
                return self.name(f"{value.name}.{suffix}", Place(b.offset, b.statement.blocks), depth + 1)
            elif b.dim3 and suffix in ("x", "y", "z"):
                value = value if suffix == "x" else Num(1)
            else:
                return self._opaque(f"`{n}`, which kernel-lsp cannot read from {where}")
        resolved = self.expr(value, Place(b.offset, b.statement.blocks), depth + 1)
        if isinstance(resolved, Num):
            return resolved
        names, calls = names_and_calls(resolved)
        markers = [m for m in names if m.startswith(OPAQUE)]
        if markers:
            cause = self.causes.get(markers[0], "")
            # The innermost statement that could not be followed is the one worth showing.
            return resolved if "(line " in cause else self._opaque(f"{cause} ({where})")
        if calls:
            return self._opaque(f"{call_cause(resolved, calls)} ({where})")
        return resolved

    def is_dim3(self, n: str, at: Place) -> bool:
        """Whether `n` names a dim3 (a `dim3` variable, an alias of one, a launch config field)."""
        if n.endswith(("gridDim", "blockDim")):
            return True
        found = self._binding(n, at)
        if found is None and self.parent is not None:
            return self.parent[0].is_dim3(n, self.parent[1])
        if isinstance(found, Binding) and found.name == n:
            if found.dim3 or isinstance(found.value, Braced):
                return True
            if isinstance(found.value, Name):
                return self.is_dim3(found.value.name, Place(found.offset, found.statement.blocks))
            return False
        param = self.params.get(n)
        return param is not None and param.base_type == "dim3"

    # --- quantities -----------------------------------------------------------------------------

    def quantity(self, label: str, text: str, at: Place, dims: int, real: bool = False) -> Quantity:
        """A grid or block (`dims` = 3) or a byte count (`dims` = 1) as written at `at`;
        `real`: a kernel argument, which may be a floating-point value."""
        text = " ".join(text.split())
        parsed = parse(text)
        if parsed is None:
            return Quantity(text, None, f"{label} `{text}` is not an expression kernel-lsp reads")
        items: list[Expr]
        if dims == 3:
            from .scan import dim3_value

            value = dim3_value(parsed)
            if isinstance(value, Braced):
                items = list(value.items)
            elif isinstance(value, Name) and self.is_dim3(value.name, at):
                items = [Name(f"{value.name}.{axis}") for axis in "xyz"]
            else:
                items = [parsed, Num(1), Num(1)]
        else:
            items = [parsed]
        resolved = [self.expr(item, at) for item in items]
        for r in resolved:
            reason = self.why(r, real)
            if reason:
                return Quantity(text, None, f"{label} `{text}` depends on {reason}")
        return Quantity(text, tuple(_integral(rename(r, _plain_names(r))) for r in resolved))

    def why(self, e: Expr, real: bool = False) -> str:
        """Why `e` is no value or expression over the parameters ("" when it is one)."""
        if isinstance(e, Num) and (real or isinstance(e.value, int) or e.value.is_integer()):
            return ""
        names, calls = names_and_calls(e)
        markers = [n for n in names if n.startswith(OPAQUE)]
        if markers:
            return self.causes.get(markers[0], "a value kernel-lsp cannot follow")
        if calls:
            return call_cause(e, calls)
        if int_value(e) is not None:
            return ""
        if any(isinstance(x, Num) and isinstance(x.value, float) for x in walk(e)):
            return f"`{to_c(e)}`, a floating-point value"
        others = [n for n in names if not n.startswith(PARAM)]
        return f"`{others[0]}`, which kernel-lsp cannot follow" if others else ""


def _integral(e: Expr) -> Expr:
    """`4.0` (from `ceil`) as the int 4."""
    v = int_value(e)
    return Num(v) if isinstance(v, int) else e


def _plain_names(e: Expr) -> dict[str, str]:
    return {n: n[len(PARAM) :] for n in free_names(e) if n.startswith(PARAM)}


def _short(text: str, most: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"


def call_cause(e: Expr, calls: list[str]) -> str:
    """Words for a value that needs a call at run time."""
    call = next((x for x in walk(e) if isinstance(x, Call) and x.func == calls[0]), None)
    shown = _short(to_c(call)) if call is not None else calls[0]
    if "argv" in to_c(e):
        return "a runtime value read from argv"
    base = calls[0].rpartition(".")[2].rpartition("::")[2]
    if base in ("getenv", "secure_getenv"):
        return "an environment variable"
    if base.startswith("cudaOccupancy"):
        return f"`{shown}`, chosen at run time by the occupancy API"
    if calls[0] == "sizeof":
        return f"`{shown}`, the size of a type kernel-lsp does not know"
    if "." in calls[0] or base in ("size", "numel", "stride", "dim", "rows", "cols"):
        return f"`{shown}`, a size known only at run time"
    return f"`{shown}`, a call kernel-lsp does not evaluate"


def statement_at(stmts: list[Statement], offset: int) -> Statement | None:
    """The statement holding `offset` (the last one that starts at or before it)."""
    best = None
    for s in stmts:
        if s.start <= offset:
            best = s
        else:
            break
    return best
