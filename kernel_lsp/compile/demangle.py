"""Itanium C++ demangling of kernel entry symbols, in pure Python.

Kernels in template-heavy code are named by what they were instantiated with: CUB and Thrust
policy types, iterators and functors, `__device__` functions and members passed as template
arguments (`L_Z...E` inside `X...E` expressions), lambdas (`{lambda(float)#1}`), packs and
decltype parameters. The parser reads the ABI's grammar into a small tree (names, types,
expressions, substitutions and template parameters resolved as it goes) and renders it twice:
the way `c++filt` writes it (`style="c++filt"`, for tests against binutils) and a readable form
for users (`const float*`, ABI-versioning inline namespaces such as `cub::_V_300500_SM_900` and
`cuda::std::__4` left out, `&ops::add<float>` for a function's address).

A symbol outside the grammar read here gives None; nothing here raises on any input, and the
output of a symbol built to explode (substitutions of substitutions) is capped. No external tool
is needed (c++filt may be absent, and a subprocess per hover is too slow).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..lexer import top_level_spans

READABLE = "readable"
CXXFILT = "c++filt"

_MAX_SYMBOL = 32_768
_MAX_OUTPUT = 32_768
_MAX_DEPTH = 256

_BUILTIN = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
_BUILTIN_D = {
    "Dh": "half",
    "Di": "char32_t",
    "Ds": "char16_t",
    "Du": "char8_t",
    "Dn": "decltype(nullptr)",
    "Da": "auto",
    "Dc": "decltype(auto)",
}
_STD_ABBREV = {
    "a": "std::allocator",
    "b": "std::basic_string",
    "s": "std::string",
    "i": "std::istream",
    "o": "std::ostream",
    "d": "std::iostream",
}
# Integer literal suffixes as c++filt writes them (`5u`, `5ull`); other types are cast: `(short)5`.
_LITERAL_SUFFIX = {
    "int": "",
    "unsigned int": "u",
    "long": "l",
    "unsigned long": "ul",
    "long long": "ll",
    "unsigned long long": "ull",
}
# Operator encodings: name, arity (for expressions) and how c++filt spells `operator...`.
_OPERATORS = {
    "nw": ("new", 1),
    "na": ("new[]", 1),
    "dl": ("delete", 1),
    "da": ("delete[]", 1),
    "ps": ("+", 1),
    "ng": ("-", 1),
    "ad": ("&", 1),
    "de": ("*", 1),
    "co": ("~", 1),
    "nt": ("!", 1),
    "pp": ("++", 1),
    "mm": ("--", 1),
    "pl": ("+", 2),
    "mi": ("-", 2),
    "ml": ("*", 2),
    "dv": ("/", 2),
    "rm": ("%", 2),
    "an": ("&", 2),
    "or": ("|", 2),
    "eo": ("^", 2),
    "aS": ("=", 2),
    "pL": ("+=", 2),
    "mI": ("-=", 2),
    "mL": ("*=", 2),
    "dV": ("/=", 2),
    "rM": ("%=", 2),
    "aN": ("&=", 2),
    "oR": ("|=", 2),
    "eO": ("^=", 2),
    "ls": ("<<", 2),
    "rs": (">>", 2),
    "lS": ("<<=", 2),
    "rS": (">>=", 2),
    "eq": ("==", 2),
    "ne": ("!=", 2),
    "lt": ("<", 2),
    "gt": (">", 2),
    "le": ("<=", 2),
    "ge": (">=", 2),
    "ss": ("<=>", 2),
    "aa": ("&&", 2),
    "oo": ("||", 2),
    "cm": (",", 2),
    "pm": ("->*", 2),
    "pt": ("->", 2),
    "cl": ("()", 2),
    "ix": ("[]", 2),
    "qu": ("?", 3),
}
# Inline namespaces that version an ABI (CCCL's `_V_300500_SM_900`, libcu++'s `__4`, libstdc++'s
# `__cxx11`): invisible in source, so the readable form leaves them out.
_ABI_NAMESPACE = re.compile(r"_V_\d+(?:_SM_\d+)*|__\d+|__cxx11")


class _Fail(Exception):
    pass


# --- the tree ---------------------------------------------------------------------------------


class _Node:
    __slots__ = ()


class _Name(_Node):
    __slots__ = ("abi", "text")

    def __init__(self, text: str, abi: bool = False) -> None:
        self.text = text
        self.abi = abi


class _Nested(_Node):
    __slots__ = ("name", "scope")

    def __init__(self, scope: _Node, name: _Node) -> None:
        self.scope = scope
        self.name = name


class _Template(_Node):
    __slots__ = ("args", "name")

    def __init__(self, name: _Node, args: list[_Node]) -> None:
        self.name = name
        self.args = args


class _Qualified(_Node):
    __slots__ = ("inner", "quals")

    def __init__(self, inner: _Node, quals: tuple[str, ...]) -> None:
        self.inner = inner
        self.quals = quals


class _Pointer(_Node):
    __slots__ = ("inner", "symbol")

    def __init__(self, inner: _Node, symbol: str) -> None:
        self.inner = inner
        self.symbol = symbol


class _Function(_Node):
    __slots__ = ("cv", "params", "ref", "ret")

    def __init__(self, ret: _Node, params: list[_Node], cv: str = "", ref: str = "") -> None:
        self.ret = ret
        self.params = params
        self.cv = cv
        self.ref = ref


class _Array(_Node):
    __slots__ = ("inner", "size")

    def __init__(self, inner: _Node, size: _Node | None) -> None:
        self.inner = inner
        self.size = size


class _MemberPointer(_Node):
    __slots__ = ("cls", "inner")

    def __init__(self, cls: _Node, inner: _Node) -> None:
        self.cls = cls
        self.inner = inner


class _Pack(_Node):
    __slots__ = ("items",)

    def __init__(self, items: list[_Node]) -> None:
        self.items = items


class _PackRef(_Node):
    """A template parameter that names a pack: inside a pack expansion, one element at a time."""

    __slots__ = ("pack",)

    def __init__(self, pack: _Pack) -> None:
        self.pack = pack


class _Expansion(_Node):
    __slots__ = ("inner",)

    def __init__(self, inner: _Node) -> None:
        self.inner = inner


class _Seq(_Node):
    """Expressions and literals: text and nodes, rendered in order."""

    __slots__ = ("parts",)

    def __init__(self, *parts: str | _Node) -> None:
        self.parts = parts


class _Literal(_Node):
    __slots__ = ("type", "value")

    def __init__(self, type_: _Node, value: str) -> None:
        self.type = type_
        self.value = value


class _Address(_Node):
    """`&` applied to an entity (`L_Z...E`): a function's or a member's address."""

    __slots__ = ("entity",)

    def __init__(self, entity: _Encoding) -> None:
        self.entity = entity


class _Encoding(_Node):
    __slots__ = ("cv", "is_template", "name", "params", "ref", "ret")

    def __init__(self, name, ret, params, cv: str = "", ref: str = "", is_template: bool = False) -> None:
        self.name = name
        self.ret = ret
        self.params = params  # None: data (a variable), not a function
        self.cv = cv
        self.ref = ref
        self.is_template = is_template


class _Local(_Node):
    __slots__ = ("entity", "function")

    def __init__(self, function: _Encoding, entity: _Node) -> None:
        self.function = function
        self.entity = entity


class _Closure(_Node):
    __slots__ = ("number", "params")

    def __init__(self, params: list[_Node], number: int) -> None:
        self.params = params
        self.number = number


# --- the parser -------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[_Node] = []
        self.template_args: list[_Node] = []
        self.lambda_params = False  # T_ inside a lambda's signature is its own `auto` parameter
        self.depth = 0

    # characters

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def take(self, n: int = 1) -> str:
        if self.i + n > len(self.s):
            raise _Fail
        out = self.s[self.i : self.i + n]
        self.i += n
        return out

    def expect(self, text: str) -> None:
        if self.take(len(text)) != text:
            raise _Fail

    def eat(self, text: str) -> bool:
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def number(self) -> int:
        start = self.i
        while self.i < len(self.s) and "0" <= self.s[self.i] <= "9":
            self.i += 1
        if start == self.i or self.i - start > 9:
            raise _Fail
        return int(self.s[start : self.i])

    def seq_id(self) -> int:
        """`_` is 0; `<base-36 digits>_` is the number plus one (S<seq>_, T<seq>_)."""
        start = self.i
        while self.i < len(self.s) and self.s[self.i] != "_":
            self.i += 1
        digits = self.s[start : self.i]
        self.expect("_")
        if not digits:
            return 0
        if len(digits) > 6 or not all(c.isdigit() or "A" <= c <= "Z" for c in digits):
            raise _Fail
        return int(digits, 36) + 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Fail

    # names

    def encoding(self, top: bool) -> _Encoding:
        self.enter()
        saved = self.template_args
        name, cv, ref, is_template = self.name(top=True)
        if not self.peek() or self.peek() in ".E":
            self.depth -= 1
            if not top:
                self.template_args = saved
            return _Encoding(name, None, None, cv, ref, is_template)
        # A template instance encodes its return type first (constructors and the like do not,
        # but they are not kernels).
        ret = self.type() if is_template else None
        params = self.bare_function_types()
        self.depth -= 1
        if not top:
            self.template_args = saved
        return _Encoding(name, ret, params, cv, ref, is_template)

    def bare_function_types(self) -> list[_Node]:
        params: list[_Node] = []
        while self.peek() and self.peek() not in ".E":
            params.append(self.type())
        if not params:
            raise _Fail
        if len(params) == 1 and isinstance(params[0], _Name) and params[0].text == "void":
            return []
        return params

    def name(self, top: bool = False) -> tuple[_Node, str, str, bool]:
        """(name, cv and ref qualifiers of a member function, whether it ends in template args)."""
        c = self.peek()
        if c == "N":
            return self.nested_name(top)
        if c == "Z":
            return self.local_name(), "", "", False
        if self.eat("St"):
            node: _Node = _Nested(_Name("std"), self.unqualified_name(None))
        elif c == "S":
            node = self.substitution()
            if self.peek() != "I":
                raise _Fail
            return self.with_template_args(node, top, push=False), "", "", True
        else:
            node = self.unqualified_name(None)
        if self.peek() == "I":
            return self.with_template_args(node, top, push=True), "", "", True
        return node, "", "", False

    def with_template_args(self, node: _Node, top: bool, push: bool) -> _Node:
        if push:  # an unscoped template name is a substitution candidate
            self.subs.append(node)
        args = self.template_args_list()
        if top:
            self.template_args = args
        return _Template(node, args)

    def nested_name(self, top: bool) -> tuple[_Node, str, str, bool]:
        self.expect("N")
        cv = self.cv_qualifiers()
        ref = "&" if self.eat("R") else "&&" if self.eat("O") else ""
        so_far: _Node | None = None
        pushed_last = False
        is_template = False
        while not self.eat("E"):
            c = self.peek()
            if not c:
                raise _Fail
            is_template = False
            if c == "S" and self.peek(2) != "St":
                if so_far is not None:
                    raise _Fail
                so_far = self.substitution()
                pushed_last = False
                continue
            if self.eat("St"):
                if so_far is not None:
                    raise _Fail
                so_far = _Name("std")
                pushed_last = False
                continue
            if c == "T":
                so_far = self.template_param()
            elif c == "I":
                if so_far is None:
                    raise _Fail
                args = self.template_args_list()
                if top:
                    self.template_args = args
                so_far = _Template(so_far, args)
                is_template = True
            elif self.peek(2) in ("Dt", "DT"):
                so_far = self.decltype()
            else:
                unqualified = self.unqualified_name(so_far)
                so_far = unqualified if so_far is None else _Nested(so_far, unqualified)
            # Every prefix is a substitution candidate; the whole name is taken back off below.
            self.subs.append(so_far)
            pushed_last = True
        if so_far is None:
            raise _Fail
        if pushed_last:
            self.subs.pop()
        return so_far, cv, ref, is_template

    def local_name(self) -> _Node:
        """Z <function encoding> E <entity>: something declared inside a function, such as the
        closure type of a lambda (`run(float*)::{lambda(float)#1}`)."""
        self.expect("Z")
        function = self.encoding(top=False)
        self.expect("E")
        if self.eat("s"):
            self.discriminator()
            return _Local(function, _Name("string literal"))
        if self.eat("d"):
            if self.peek() != "_":
                self.number()
            self.expect("_")
        saved = self.template_args
        entity, _, _, _ = self.name()
        self.template_args = saved
        self.discriminator()
        return _Local(function, entity)

    def discriminator(self) -> None:
        if self.eat("__"):
            self.number()
            self.expect("_")
        elif self.peek() == "_" and self.peek(2)[1:].isdigit():
            self.take(2)

    def unqualified_name(self, scope: _Node | None) -> _Node:
        self.enter()
        c = self.peek()
        if c.isdigit():
            node: _Node = self.source_name()
        elif c == "L" and self.peek(2)[1:].isdigit():  # internal linkage (GCC)
            self.take(1)
            node = self.source_name()
            self.discriminator()
        elif self.eat("Ut"):
            n = self.number() + 1 if self.peek() != "_" else 1
            self.expect("_")
            node = _Name(f"{{unnamed type#{n}}}")
        elif self.eat("Ul"):
            node = self.closure()
        elif c == "C" and self.peek(2)[1:] in ("1", "2", "3", "4", "5", "I"):
            self.take(1)
            if self.eat("I"):
                self.take(1)
                self.type()  # inheriting constructor: the base class
            else:
                self.take(1)
            node = _Name(_base_name(scope))
        elif c == "D" and self.peek(2)[1:] in ("0", "1", "2", "4", "5"):
            self.take(2)
            node = _Name("~" + _base_name(scope))
        elif c.islower() and c:
            node = self.operator_name()
        else:
            raise _Fail
        while self.eat("B"):  # ABI tags: `name[abi:cxx11]`
            tag = self.source_name()
            node = _Seq(node, f"[abi:{tag.text}]")
        self.depth -= 1
        return node

    def operator_name(self) -> _Node:
        code = self.take(2)
        if code == "cv":
            return _Seq("operator ", self.type())
        if code == "li":
            return _Seq('operator"" ', self.source_name())
        if code[0] == "v" and code[1].isdigit():
            return _Seq("operator ", self.source_name())
        if code not in _OPERATORS:
            raise _Fail
        text = _OPERATORS[code][0]
        return _Name("operator" + (" " if text[0].isalpha() else "") + text)

    def source_name(self) -> _Name:
        n = self.number()
        if n <= 0:
            raise _Fail
        text = self.take(n)
        if text.startswith("_GLOBAL__N"):
            return _Name("(anonymous namespace)")
        return _Name(text, abi=bool(_ABI_NAMESPACE.fullmatch(text)))

    def closure(self) -> _Node:
        """Ul <lambda-sig> E [<number>] _  (after `Ul`)."""
        saved = self.lambda_params
        self.lambda_params = True
        params: list[_Node] = []
        while not self.eat("E"):
            if not self.peek():
                raise _Fail
            if self.peek() == "T" and self.peek(2)[1:] in ("y", "n", "t", "p"):
                raise _Fail  # C++20 explicit template parameters of a lambda
            params.append(self.type())
        self.lambda_params = saved
        n = self.number() + 2 if self.peek() != "_" else 1
        self.expect("_")
        if len(params) == 1 and isinstance(params[0], _Name) and params[0].text == "void":
            params = []
        return _Closure(params, n)

    def substitution(self) -> _Node:
        self.expect("S")
        c = self.peek()
        if c in _STD_ABBREV:
            self.take(1)
            return _Name(_STD_ABBREV[c])
        k = self.seq_id()
        if k >= len(self.subs):
            raise _Fail
        return self.subs[k]

    def template_param(self) -> _Node:
        self.expect("T")
        if self.peek() == "L":  # a parameter of an enclosing level: TL <level> __ <index> _
            raise _Fail
        k = self.seq_id()
        if self.lambda_params:
            return _Name(f"auto:{k + 1}")
        if k >= len(self.template_args):
            raise _Fail
        arg = self.template_args[k]
        return _PackRef(arg) if isinstance(arg, _Pack) else arg

    def template_args_list(self) -> list[_Node]:
        self.enter()
        self.expect("I")
        args: list[_Node] = []
        while not self.eat("E"):
            if not self.peek():
                raise _Fail
            args.append(self.template_arg())
        self.depth -= 1
        return args

    def template_arg(self) -> _Node:
        c = self.peek()
        if c == "L":
            return self.expr_primary()
        if c == "X":
            self.take(1)
            e = self.expression()
            self.expect("E")
            return e
        if c == "J":
            self.take(1)
            items = []
            while not self.eat("E"):
                if not self.peek():
                    raise _Fail
                items.append(self.template_arg())
            return _Pack(items)
        return self.type()

    # types

    def cv_qualifiers(self) -> str:
        quals = []
        while self.peek() in ("r", "V", "K") and self.peek():
            quals.append({"r": "restrict", "V": "volatile", "K": "const"}[self.take(1)])
        return " ".join(reversed(quals))

    def type(self) -> _Node:
        self.enter()
        node = self._type()
        self.depth -= 1
        return node

    def _type(self) -> _Node:
        c = self.peek()
        if not c:
            raise _Fail
        if c in _BUILTIN:
            self.take(1)
            return _Name(_BUILTIN[c])
        two = self.peek(2)
        if two in _BUILTIN_D:
            self.take(2)
            return _Name(_BUILTIN_D[two])
        if two == "DF":  # _FloatN, std::bfloat16_t
            self.take(2)
            bits = self.number()
            if self.eat("b"):
                return _Name("std::bfloat16_t")
            if self.eat("x"):
                return _Name(f"_Float{bits}x")
            self.expect("_")
            return _Name(f"_Float{bits}")
        if two == "Dp":
            self.take(2)
            out: _Node = _Expansion(self.type())
            self.subs.append(out)
            return out
        if two in ("Dt", "DT"):
            out = self.decltype()
            self.subs.append(out)
            return out
        if two == "Dv":
            self.take(2)
            if self.peek().isdigit():
                size: str | _Node = str(self.number())
            else:
                self.expect("_")
                size = self.expression()
            self.expect("_")
            out = _Seq(self.type(), " __vector(", size, ")")
            self.subs.append(out)
            return out
        if c in ("r", "V", "K"):
            quals = self.cv_qualifiers()
            inner = self.type()
            if isinstance(inner, _Function):
                out = _Function(inner.ret, inner.params, (inner.cv + " " + quals).strip(), inner.ref)
            else:
                out = _Qualified(inner, tuple(quals.split()))
            self.subs.append(out)
            return out
        if c in ("P", "R", "O", "C", "G"):
            self.take(1)
            inner = self.type()
            if c in ("C", "G"):
                out = _Seq(inner, " _Complex" if c == "C" else " _Imaginary")
            else:
                out = _Pointer(inner, {"P": "*", "R": "&", "O": "&&"}[c])
            self.subs.append(out)
            return out
        if c == "F":
            out = self.function_type()
            self.subs.append(out)
            return out
        if c == "A":
            self.take(1)
            if self.peek() == "_":
                size_node: _Node | None = None
            elif self.peek().isdigit():
                size_node = _Name(str(self.number()))
            else:
                size_node = self.expression()
            self.expect("_")
            out = _Array(self.type(), size_node)
            self.subs.append(out)
            return out
        if c == "M":
            self.take(1)
            cls = self.type()
            out = _MemberPointer(cls, self.type())
            self.subs.append(out)
            return out
        if c == "T":
            if two[1:] in ("s", "u", "e"):  # elaborated: struct/union/enum name
                self.take(2)
                out = self.name()[0]
                self.subs.append(out)
                return out
            lambda_param = self.lambda_params
            out = self.template_param()
            if not lambda_param:  # a lambda's own `auto` parameter is no candidate
                self.subs.append(out)
            if self.peek() == "I":
                out = _Template(out, self.template_args_list())
                self.subs.append(out)
            return out
        if c == "S" and two != "St":
            out = self.substitution()
            if self.peek() == "I":
                out = _Template(out, self.template_args_list())
                self.subs.append(out)
            return out
        if c == "u":  # a vendor type
            self.take(1)
            out = self.source_name()
            if self.peek() == "I":
                out = _Template(out, self.template_args_list())
            self.subs.append(out)
            return out
        if c in ("N", "Z") or c.isdigit() or two == "St":
            saved = self.template_args
            out = self.name()[0]
            self.template_args = saved
            self.subs.append(out)
            return out
        raise _Fail

    def function_type(self) -> _Function:
        self.expect("F")
        self.eat("Y")  # extern "C"
        ret = self.type()
        params: list[_Node] = []
        ref = ""
        while not self.eat("E"):
            if self.peek(2) in ("RE", "OE"):
                ref = "&" if self.take(1) == "R" else "&&"
                continue
            if not self.peek():
                raise _Fail
            params.append(self.type())
        if len(params) == 1 and isinstance(params[0], _Name) and params[0].text == "void":
            params = []
        return _Function(ret, params, "", ref)

    def decltype(self) -> _Node:
        self.take(2)
        e = self.expression()
        self.expect("E")
        return _Seq("decltype(", e, ")")

    # expressions

    def expr_primary(self) -> _Node:
        self.expect("L")
        if self.peek(2) == "_Z" or self.peek() == "Z":
            self.eat("_")
            self.expect("Z")
            entity = self.encoding(top=False)
            self.expect("E")
            return entity
        t = self.type()
        start = self.i
        while self.peek() and self.peek() != "E":
            self.i += 1
        value = self.s[start : self.i]
        self.expect("E")
        return _Literal(t, value)

    def expression(self) -> _Node:
        self.enter()
        node = self._expression()
        self.depth -= 1
        return node

    def _expression(self) -> _Node:
        c = self.peek()
        two = self.peek(2)
        if c == "L":
            return self.expr_primary()
        if c == "T":
            return self.template_param()
        if two == "fp":
            self.take(2)
            self.cv_qualifiers()
            k = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return _Name(f"{{parm#{k}}}")
        if two == "fL":
            self.take(2)
            self.number()
            self.expect("p")
            self.cv_qualifiers()
            k = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return _Name(f"{{parm#{k}}}")
        if two == "ad" and self.peek(3)[2:] == "L":
            # The address of an entity: `&ops::square`, `&ops::Particle::y`.
            self.take(2)
            target = self.expr_primary()
            if isinstance(target, _Encoding):
                return _Address(target)
            return _Seq("&", target)
        if two in ("st", "at"):
            self.take(2)
            return _Seq("sizeof (" if two == "st" else "alignof (", self.type(), ")")
        if two in ("sz", "az"):
            self.take(2)
            return _Seq("sizeof (" if two == "sz" else "alignof (", self.expression(), ")")
        if two == "sZ":
            self.take(2)
            return _Seq("sizeof...(", self.template_param(), ")")
        if two == "sp":
            self.take(2)
            return _Seq(self.expression(), "...")
        if two == "cv":
            self.take(2)
            t = self.type()
            if self.eat("_"):
                items: list[str | _Node] = []
                while not self.eat("E"):
                    if items:
                        items.append(", ")
                    items.append(self.expression())
                return _Seq("(", t, ")(", *items, ")")
            return _Seq("(", t, ")", self.expression())
        if two in ("sc", "dc", "cc", "rc"):
            self.take(2)
            cast = {"sc": "static_cast", "dc": "dynamic_cast", "cc": "const_cast", "rc": "reinterpret_cast"}
            t = self.type()
            return _Seq(cast[two], "<", t, ">(", self.expression(), ")")
        if two == "cl":
            self.take(2)
            callee = self.expression()
            args: list[str | _Node] = []
            while not self.eat("E"):
                if args:
                    args.append(", ")
                args.append(self.expression())
            return _Seq(callee, "(", *args, ")")
        if two in ("dt", "pt"):
            self.take(2)
            obj = self.expression()
            member = self.unresolved_name()
            return _Seq(obj, "." if two == "dt" else "->", member)
        if two == "sr":
            return self.unresolved_name()
        if two == "tl":
            self.take(2)
            t = self.type()
            items = []
            while not self.eat("E"):
                if items:
                    items.append(", ")
                items.append(self.expression())
            return _Seq(t, "{", *items, "}")
        if two == "nx":
            self.take(2)
            return _Seq("noexcept (", self.expression(), ")")
        if two in _OPERATORS:
            self.take(2)
            text, arity = _OPERATORS[two]
            if two in ("pp", "mm") and self.eat("_"):  # prefix form
                return _Seq(text, "(", self.expression(), ")")
            operands = [self.expression() for _ in range(arity)]
            if arity == 1:
                return _Seq(text, "(", operands[0], ")")
            if arity == 2:
                return _Seq("(", operands[0], ") ", text, " (", operands[1], ")")
            return _Seq("(", operands[0], ") ? (", operands[1], ") : (", operands[2], ")")
        if c.isdigit() or two == "on":
            return self.unresolved_name()
        raise _Fail

    def unresolved_name(self) -> _Node:
        """The name part of `sr`, `dt`, `pt` and bare names in expressions (a useful subset)."""
        if self.eat("sr"):
            if self.eat("N"):
                scope: _Node = self.type()
                while not self.eat("E"):
                    scope = _Nested(scope, self.base_unresolved_name())
                return _Nested(scope, self.base_unresolved_name())
            scope = self.type()
            return _Nested(scope, self.base_unresolved_name())
        self.eat("gs")
        return self.base_unresolved_name()

    def base_unresolved_name(self) -> _Node:
        if self.eat("on"):
            node = self.operator_name()
        elif self.peek().isdigit():
            node = self.source_name()
        else:
            raise _Fail
        if self.peek() == "I":
            node = _Template(node, self.template_args_list())
        return node


def _base_name(scope: _Node | None) -> str:
    """The class a constructor or destructor belongs to, as its name is spelled."""
    while isinstance(scope, (_Nested, _Template)):
        scope = scope.name
    if isinstance(scope, _Name):
        return scope.text
    raise _Fail


# --- rendering --------------------------------------------------------------------------------


class _Render:
    def __init__(self, style: str) -> None:
        self.readable = style == READABLE
        self.pack_index: int | None = None

    def cap(self, text: str) -> str:
        if len(text) > _MAX_OUTPUT:
            raise _Fail
        return text

    def __call__(self, node: _Node | str | None) -> str:
        if node is None:
            return ""
        if isinstance(node, str):
            return node
        if isinstance(node, (_Pointer, _Qualified, _Function, _Array, _MemberPointer)):
            return self.cap(self.left(node) + self.right(node))
        return self.cap(self.plain(node))

    def plain(self, node: _Node) -> str:
        if isinstance(node, _Name):
            return "" if self.readable and node.abi else node.text
        if isinstance(node, _Nested):
            scope, name = self(node.scope), self(node.name)
            return scope if not name else name if not scope else f"{scope}::{name}"
        if isinstance(node, _Template):
            args = ", ".join(self.args(node.args))
            close = " >" if not self.readable and args.endswith(">") else ">"
            return f"{self(node.name)}<{args}{close}"
        if isinstance(node, _Pack):
            return ", ".join(self(i) for i in node.items)
        if isinstance(node, _PackRef):
            items = node.pack.items
            if self.pack_index is not None and self.pack_index < len(items):
                return self(items[self.pack_index])
            return ", ".join(self(i) for i in items)
        if isinstance(node, _Expansion):
            return ", ".join(self.expand(node))
        if isinstance(node, _Seq):
            return "".join(self(p) for p in node.parts)
        if isinstance(node, _Literal):
            return self.literal(node)
        if isinstance(node, _Address):
            return "&" + self.address(node.entity)
        if isinstance(node, _Encoding):
            return self.encoding(node)
        if isinstance(node, _Local):
            return f"{self.encoding(node.function, with_return=False)}::{self(node.entity)}"
        if isinstance(node, _Closure):
            return f"{{lambda({', '.join(self.params(node.params))})#{node.number}}}"
        raise _Fail

    def args(self, args: list[_Node]) -> list[str]:
        out: list[str] = []
        for a in args:
            if isinstance(a, _Pack):
                out += [self(i) for i in a.items]
            elif isinstance(a, _PackRef) and self.pack_index is None:
                out += [self(i) for i in a.pack.items]
            else:
                out.append(self(a))
        return out

    def params(self, params: list[_Node]) -> list[str]:
        out: list[str] = []
        for p in params:
            if isinstance(p, _Expansion):
                out += self.expand(p)
            else:
                out.append(self(p))
        return out

    def expand(self, node: _Expansion) -> list[str]:
        """A pack expansion (`Dp`) rendered once per element of the pack it names."""
        size = _pack_size(node.inner)
        if size is None:
            return [self(node.inner) + "..."]
        saved, out = self.pack_index, []
        for k in range(size):
            self.pack_index = k
            out.append(self(node.inner))
        self.pack_index = saved
        return out

    def literal(self, node: _Literal) -> str:
        t = self(node.type)
        value = node.value
        negative = value.startswith("n")
        if negative:
            value = "-" + value[1:]
        if t == "bool" and value in ("0", "1"):
            return "true" if value == "1" else "false"
        if t in _LITERAL_SUFFIX:
            return value + _LITERAL_SUFFIX[t]
        if self.readable and t == "char" and value.isdigit() and 32 < int(value) < 127:
            return repr(chr(int(value)))
        if self.readable and t == "decltype(nullptr)":
            return "nullptr"
        return f"({t}){value}"

    def address(self, entity: _Encoding) -> str:
        """A function's or member's address: readable, just its name; c++filt writes a function
        template's instance or a const member function out whole, in parentheses."""
        if self.readable or entity.params is None or (not entity.is_template and not entity.cv):
            return self(entity.name)
        return f"({self.encoding(entity)})"

    def encoding(self, node: _Encoding, with_return: bool = True) -> str:
        name = self(node.name)
        if node.params is None:
            return name
        text = f"{name}({', '.join(self.params(node.params))})"
        if node.cv:
            text += " " + node.cv
        if node.ref:
            text += " " + node.ref
        if with_return and node.ret is not None:
            text = f"{self(node.ret)} {text}"
        return text

    # declarators: `float (*)(float)`, `int (&) [4]`, `float (S::*)() const`

    def left(self, node: _Node) -> str:
        if isinstance(node, _Pointer):
            inner = node.inner
            if isinstance(inner, _Function):
                return self.left(inner) + "(" + node.symbol
            if isinstance(inner, _Array):
                return self.left(inner) + " (" + node.symbol
            return self.left(inner) + node.symbol
        if isinstance(node, _MemberPointer):
            cls = self(node.cls)
            if isinstance(node.inner, _Function):
                return self.left(node.inner) + f"({cls}::*"
            return self.left(node.inner) + f" {cls}::*"
        if isinstance(node, _Qualified):
            quals = " ".join(node.quals)
            inner = node.inner
            if self.readable and not isinstance(inner, (_Pointer, _MemberPointer, _Function, _Array)):
                return f"{quals} {self.left(inner)}"
            return f"{self.left(inner)} {quals}"
        if isinstance(node, _Function):
            return self(node.ret) + " "
        if isinstance(node, _Array):
            return self.left(node.inner)
        return self(node)

    def right(self, node: _Node) -> str:
        if isinstance(node, (_Pointer, _MemberPointer)):
            if isinstance(node.inner, (_Function, _Array)):
                return ")" + self.right(node.inner)
            return self.right(node.inner)
        if isinstance(node, _Qualified):
            return self.right(node.inner)
        if isinstance(node, _Function):
            text = f"({', '.join(self.params(node.params))})"
            if node.cv:
                text += " " + node.cv
            if node.ref:
                text += " " + node.ref
            return text
        if isinstance(node, _Array):
            return f" [{self(node.size)}]" + self.right(node.inner)
        return ""


def _pack_size(node: object, depth: int = 0) -> int | None:
    """The size of the first pack a pack expansion's pattern refers to."""
    if depth > 64:
        return None
    if isinstance(node, _PackRef):
        return len(node.pack.items)
    children: tuple = ()
    if isinstance(node, (_Pointer, _Qualified, _Array, _Expansion)):
        children = (node.inner,)
    elif isinstance(node, _Template):
        children = (node.name, *node.args)
    elif isinstance(node, _Nested):
        children = (node.scope, node.name)
    elif isinstance(node, _Function):
        children = (node.ret, *node.params)
    elif isinstance(node, _MemberPointer):
        children = (node.cls, node.inner)
    elif isinstance(node, _Seq):
        children = tuple(p for p in node.parts if isinstance(p, _Node))
    for child in children:
        size = _pack_size(child, depth + 1)
        if size is not None:
            return size
    return None


# --- the interface ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Demangled:
    qualified: str  # "ops::total", "cub::detail::reduce::DeviceReduceSingleTileKernel"
    name: str  # "total"
    template_args: tuple[str, ...]  # ("float", "256")
    params: tuple[str, ...]  # ("const float*", "float*", "int")
    is_template: bool = False  # an instance, possibly of an empty pack: `many<>`

    @property
    def instance(self) -> str:
        """`total<float, 256>`, or `vadd` for a function that is not a template instance."""
        if self.template_args or self.is_template:
            return f"{self.name}<{', '.join(self.template_args)}>"
        return self.name

    @property
    def signature(self) -> str:
        return f"{self.instance}({', '.join(self.params)})"


def _parse(symbol: str) -> _Encoding | None:
    if not symbol.startswith("_Z") or len(symbol) > _MAX_SYMBOL:
        return None
    p = _Parser(symbol[2:])
    try:
        encoding = p.encoding(top=True)
        if p.peek() and p.peek() != ".":  # `.cold`, `.constprop.0`: clones of the function
            return None
    except (_Fail, ValueError, IndexError, RecursionError):
        return None
    return encoding


def demangle(symbol: str) -> Demangled | None:
    """The parts of an Itanium-mangled function symbol, readable, or None when it is not one
    (extern "C" names) or uses what this parser does not read."""
    encoding = _parse(symbol)
    if encoding is None or encoding.params is None:
        return None
    render = _Render(READABLE)
    try:
        name_node = encoding.name
        args: list[str] = []
        is_template = isinstance(name_node, _Template)
        if isinstance(name_node, _Template):
            args = render.args(name_node.args)
            name_node = name_node.name
        qualified = render(name_node)
        params = render.params(encoding.params)
    except (_Fail, RecursionError):
        return None
    name = _last_component(qualified)
    return Demangled(qualified, name, tuple(args), tuple(params), is_template)


def demangle_full(symbol: str, style: str = CXXFILT) -> str | None:
    """The whole symbol as text: `style="c++filt"` as binutils' c++filt writes it (tests compare
    the two), `"readable"` as kernel-lsp shows it."""
    encoding = _parse(symbol)
    if encoding is None:
        return None
    try:
        return _Render(style).encoding(encoding)
    except (_Fail, RecursionError):
        return None


def _last_component(qualified: str) -> str:
    """`a::b<c::d>::k` -> `k`: the last `::` outside template arguments and parentheses."""
    start, end = top_level_spans(qualified, "::")[-1]
    return qualified[start:end]


def fallback_name(symbol: str) -> str:
    """What to call an entry the demangler cannot read: its plain function name and `<?>` for
    arguments it could not name, never the raw symbol (that goes in a detail field)."""
    from .logparse import source_name

    base = source_name(symbol)
    if base == symbol and symbol.startswith("_Z"):
        return "<?>"
    return base + "<?>" if symbol.startswith("_Z") else base
