"""Arithmetic over named numbers, without Python's `eval`: launch comments (`grid=cdiv(n, BLOCK)`),
`#define` values and spec shapes are read from the workspace, and `eval` with its builtins removed
still runs code (`().__class__.__base__.__subclasses__()` reaches every class).

An expression is parsed with `ast` and walked; only this subset is evaluated: int and float
literals, names bound in the given mapping, + - * / // % ** << >> & | ^ ~ not and or, comparisons,
`a if c else b`, tuples and lists, and calls of the helpers in `FUNCTIONS` with plain arguments.
Strings, attributes, subscripts, lambdas, comprehensions and every other call are refused.
Integers are bounded (`MAX_BITS`) before they are computed, so `9**9**9` or `1 << 10**9` is an
error, not a minute of CPU; the text itself is bounded (`MAX_CHARS`). Never raises anything but
`ExprError`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_CHARS = 2000
MAX_BITS = 256  # sizes and launch figures are far below 2**64; this leaves room, and no more


class ExprError(ValueError):
    """An expression that is not in the subset, or whose value cannot be computed."""


class UnknownName(ExprError):
    def __init__(self, name: str) -> None:
        super().__init__(f"name '{name}' is not defined")
        self.name = name


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def _log2(x: Any) -> int:
    return int(math.log2(x))


def _next_pow2(x: Any) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def _round_up(a: Any, b: Any) -> int:
    return cdiv(a, b) * int(b)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "cdiv": cdiv,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "round_up": _round_up,
    "log2": _log2,
    "next_pow2": _next_pow2,
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


_ALLOWED_NODES = (
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Tuple,
    ast.List,
    ast.And,
    ast.Or,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
)


def expression_problem(text: str) -> str | None:
    """Why `text` is not an expression `safe_eval` takes (read, not evaluated), or None."""
    if len(text) > MAX_CHARS:
        return f"the expression is longer than {MAX_CHARS} characters"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        return str(e.msg)
    except (ValueError, RecursionError, MemoryError) as e:
        return type(e).__name__
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Constant) and not isinstance(node.value, (bool, int, float)):
            return f"{type(node.value).__name__} values are not allowed"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                return f"calling {_describe(node.func)} is not allowed"
            if node.func.id not in FUNCTIONS:
                return f"`{node.func.id}(...)` is not allowed; the functions are {', '.join(FUNCTIONS)}"
        elif not isinstance(node, _ALLOWED_NODES):
            return f"{_describe(node)} is not allowed (only arithmetic over sizes and macros)"
    return None


def safe_eval(text: str, names: Mapping[str, Any]) -> Any:
    """The value of `text` over `names` (numbers), or ExprError saying what is wrong."""
    if len(text) > MAX_CHARS:
        raise ExprError(f"the expression is longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"cannot read it ({e.msg})") from None
    except (ValueError, RecursionError, MemoryError) as e:  # a NUL byte, nesting without end
        raise ExprError(f"cannot read it ({type(e).__name__})") from None
    try:
        return _Walk(names).value(tree.body)
    except ExprError:
        raise
    except RecursionError:
        raise ExprError("it is nested too deeply") from None
    except (ArithmeticError, TypeError, ValueError) as e:
        raise ExprError(f"{type(e).__name__}: {e}") from None


class _Walk:
    def __init__(self, names: Mapping[str, Any]) -> None:
        self.names = names

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return _bounded(node.value)
            raise ExprError(f"{type(node.value).__name__} values are not allowed")
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return _number(node.id, self.names[node.id])
            if node.id in FUNCTIONS:
                raise ExprError(f"`{node.id}` is a function: call it, e.g. {node.id}(a, b)")
            raise UnknownName(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.value(node.left), self.value(node.right)
            if not (_is_number(left) and _is_number(right)):  # `(1,) * 10**9` would fill memory
                raise ExprError("arithmetic is on numbers only, not on tuples")
            _check_size(node.op, left, right)
            return _bounded(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _bounded(_UNARY[type(node.op)](self.value(node.operand)))
        if isinstance(node, ast.BoolOp):
            result = self.value(node.values[0])
            for item in node.values[1:]:
                if (not result) if isinstance(node.op, ast.And) else result:
                    break
                result = self.value(item)
            return result
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left = self.value(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.value(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.value(node.body) if self.value(node.test) else self.value(node.orelse)
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Call):
            return self.call(node)
        raise ExprError(f"{_describe(node)} is not allowed (only arithmetic over sizes and macros)")

    def call(self, node: ast.Call) -> Any:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name is None:
            raise ExprError(f"calling {_describe(node.func)} is not allowed")
        if name not in FUNCTIONS:
            raise ExprError(f"`{name}(...)` is not allowed; the functions are {', '.join(FUNCTIONS)}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ExprError(f"`{name}` takes plain arguments")
        return _bounded(FUNCTIONS[name](*(self.value(a) for a in node.args)))


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Attribute: "an attribute (`x.y`)",
        ast.Subscript: "a subscript (`x[i]`)",
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.GeneratorExp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.JoinedStr: "a string",
        ast.Dict: "a dict",
        ast.Set: "a set",
        ast.NamedExpr: "`:=`",
        ast.Starred: "`*`",
        ast.Await: "`await`",
    }
    return kinds.get(type(node), f"`{type(node).__name__}`")


def _number(name: str, value: Any) -> Any:
    """A bound name's value as a plain number (numpy's become int or float) or a tuple of them."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_number(name, v) for v in value)
    try:
        return operator.index(value) if hasattr(value, "__index__") else float(value)
    except (TypeError, ValueError, OverflowError):
        raise ExprError(f"`{name}` is not a number") from None


def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float))


def _bits(v: Any) -> int:
    return abs(v).bit_length() if isinstance(v, int) else 0


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse, before computing, a power or a shift whose integer would pass MAX_BITS (the other
    operators on two bounded integers cannot take long, and their result is bounded after)."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if isinstance(op, ast.Pow) and right > 0 and (_bits(left) - 1) * right > MAX_BITS:
        raise ExprError(f"{left} ** {right} is too large")
    if isinstance(op, ast.LShift) and right > 0 and left and _bits(left) + right > MAX_BITS:
        raise ExprError(f"{left} << {right} is too large")


def _bounded(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_BITS:
        raise ExprError(f"the value has more than {MAX_BITS} bits")
    if isinstance(v, tuple):
        return tuple(_bounded(x) for x in v)
    return v
