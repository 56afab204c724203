"""Itanium C++ demangling of kernel entry symbols, in pure Python.

Kernels are `void` functions with simple parameters, so the subset here is small: nested names
(namespaces, classes), template arguments (types, integer and bool literals, packs), builtin types,
pointers, references, cv-qualifiers, template parameters and substitutions. A symbol outside the
subset gives None (the caller falls back to the plain name); nothing here raises on any input,
and no external tool (c++filt may be absent, and a subprocess per hover is too slow) is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

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
_BUILTIN_D = {"Dh": "half", "Di": "char32_t", "Ds": "char16_t", "Du": "char8_t", "Dn": "decltype(nullptr)"}
_STD_ABBREV = {"t": "std", "a": "std::allocator", "b": "std::basic_string", "s": "std::string"}


class _Fail(Exception):
    pass


@dataclass(frozen=True)
class Demangled:
    qualified: str  # "ops::total"
    name: str  # "total"
    template_args: tuple[str, ...]  # ("float", "256")
    params: tuple[str, ...]  # ("const float*", "float*", "int")

    @property
    def instance(self) -> str:
        """`total<float, 256>`, or `vadd` for a function that is not a template instance."""
        return f"{self.name}<{', '.join(self.template_args)}>" if self.template_args else self.name

    @property
    def signature(self) -> str:
        return f"{self.instance}({', '.join(self.params)})"


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[str] = []
        self.template_args: list[str] = []

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def take(self, n: int = 1) -> str:
        if self.i + n > len(self.s):
            raise _Fail
        out = self.s[self.i : self.i + n]
        self.i += n
        return out

    def number(self) -> int:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] in "0123456789":
            self.i += 1
        if start == self.i or self.i - start > 6:
            raise _Fail
        return int(self.s[start : self.i])

    def seq_id(self, end: str) -> int:
        """Base-36 index of S<seq>_ / T<seq>_: empty is 0, else the number plus one."""
        start = self.i
        while self.i < len(self.s) and self.s[self.i] != end:
            self.i += 1
        digits = self.s[start : self.i]
        self.take(1)
        if not digits:
            return 0
        if len(digits) > 6 or not all(c.isascii() and c.isalnum() for c in digits):
            raise _Fail
        return int(digits, 36) + 1

    def source_name(self) -> str:
        n = self.number()
        name = self.take(n)
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def substitution(self) -> str:
        self.take(1)  # S
        c = self.peek()
        if c in _STD_ABBREV:
            self.take(1)
            return _STD_ABBREV[c]
        k = self.seq_id("_")
        if k >= len(self.subs):
            raise _Fail
        return self.subs[k]

    def template_param(self) -> str:
        self.take(1)  # T
        k = self.seq_id("_")
        if k >= len(self.template_args):
            raise _Fail
        return self.template_args[k]

    def template_args_list(self) -> list[str]:
        self.take(1)  # I
        args: list[str] = []
        while self.peek() != "E":
            if not self.peek():
                raise _Fail
            args.append(self.template_arg())
        self.take(1)
        return args

    def template_arg(self) -> str:
        c = self.peek()
        if c == "L":
            self.take(1)
            if self.peek(2) == "_Z":
                raise _Fail  # pointer to a function or object as an argument: rare for kernels
            t = self.type()
            negative = self.peek() == "n"
            if negative:
                self.take(1)
            start = self.i
            while self.peek() not in ("E", ""):
                self.i += 1
            value = self.s[start : self.i]
            self.take(1)
            if t == "bool":
                return {"0": "false", "1": "true"}.get(value, value)
            suffix = {"unsigned int": "u", "long": "l", "unsigned long": "ul", "long long": "ll"}.get(t, "")
            if t not in ("int", "unsigned int", "long", "unsigned long", "long long", "char", "short"):
                return f"({t}){'-' if negative else ''}{value}"
            return f"{'-' if negative else ''}{value}{suffix}"
        if c == "J":  # a pack
            self.take(1)
            items = []
            while self.peek() != "E":
                if not self.peek():
                    raise _Fail
                items.append(self.template_arg())
            self.take(1)
            return ", ".join(items)
        if c == "X":
            raise _Fail  # an expression
        return self.type()

    def name(self) -> tuple[str, list[str] | None]:
        """(qualified name, template args of its last component or None)."""
        c = self.peek()
        if c == "N":
            return self.nested_name()
        if c == "Z":
            raise _Fail  # a local name
        from_table = False
        if self.peek(2) == "St":
            self.take(2)
            name = "std::" + self.source_name()
        elif c == "S":
            name, from_table = self.substitution(), True
            if self.peek() != "I":
                raise _Fail
        else:
            name = self.source_name()
        if self.peek() == "I":
            if not from_table:  # an unscoped template name is a substitution candidate
                self.subs.append(name)
            args = self.template_args_list()
            return name, args
        return name, None

    def local_name(self) -> str:
        """Z <function encoding> E <entity>: a type declared inside a function, such as the closure
        type of a lambda passed to a kernel template (`run(float*)::{lambda(float)#1}`)."""
        self.take(1)  # Z
        saved = self.template_args
        function, args = self.name()
        if args is not None:
            self.template_args = args
            self.type()
            function += f"<{', '.join(args)}>"
        params = []
        while self.peek() != "E":
            if not self.peek():
                raise _Fail
            params.append(self.type())
        self.take(1)
        self.template_args = saved
        if params == ["void"]:
            params = []
        if self.peek(2) == "Ul":
            self.take(2)
            lambda_params = []
            while self.peek() != "E":
                if not self.peek():
                    raise _Fail
                lambda_params.append(self.type())
            self.take(1)
            n = self.seq_id("_")
            if lambda_params == ["void"]:
                lambda_params = []
            entity = f"{{lambda({', '.join(lambda_params)})#{n + 1}}}"
        elif self.peek() in "0123456789":
            entity = self.source_name()
        else:
            raise _Fail
        return f"{function}({', '.join(params)})::{entity}"

    def nested_name(self) -> tuple[str, list[str] | None]:
        self.take(1)  # N
        while self.peek() in ("r", "V", "K"):
            self.take(1)
        parts: list[str] = []
        args: list[str] | None = None
        while self.peek() != "E":
            c = self.peek()
            if not c:
                raise _Fail
            if c == "S" and self.peek(2) != "St":
                prefix = self.substitution()
                parts = [prefix]
                args = None
                continue
            if self.peek(2) == "St":
                self.take(2)
                parts = ["std"]
                continue
            if c == "I":
                if not parts:
                    raise _Fail
                args = self.template_args_list()
                parts[-1] += f"<{', '.join(args)}>"
            elif c in "0123456789":
                if args is not None:
                    args = None
                parts.append(self.source_name())
            elif c == "T":
                parts.append(self.template_param())
            else:
                raise _Fail  # constructors, operators, ...: not kernels
            # Every prefix but the whole name is a substitution candidate; the last one added is
            # taken back off below.
            self.subs.append("::".join(parts))
        self.take(1)
        self.subs.pop()
        qualified = "::".join(parts)
        if args is not None:
            qualified = qualified[: qualified.rfind("<")]
        return qualified, args

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN:
            self.take(1)
            return _BUILTIN[c]
        if self.peek(2) in _BUILTIN_D:
            return _BUILTIN_D[self.take(2)]
        if self.peek(2) == "Dp":  # a pack expansion: the pack's types, as the template argument reads
            self.take(2)
            return self.type()
        if self.peek(3) == "DF1" and self.peek(5) == "DF16_":
            self.take(5)
            return "_Float16"
        if c in "rVK":
            quals = []
            while self.peek() in ("r", "V", "K"):
                quals.append({"r": "__restrict__", "V": "volatile", "K": "const"}[self.take(1)])
            inner = self.type()
            out = (
                " ".join(reversed(quals)) + " " + inner if "*" not in inner else inner + " " + " ".join(quals)
            )
            self.subs.append(out)
            return out
        if c in "PRO":
            self.take(1)
            inner = self.type()
            out = inner + {"P": "*", "R": "&", "O": "&&"}[c]
            self.subs.append(out)
            return out
        if c == "T":
            out = self.template_param()
            self.subs.append(out)
            if self.peek() == "I":
                out += f"<{', '.join(self.template_args_list())}>"
                self.subs.append(out)
            return out
        if c == "S" and self.peek(2) != "St":
            out = self.substitution()
            if self.peek() == "I":
                out += f"<{', '.join(self.template_args_list())}>"
                self.subs.append(out)
            return out
        if c == "Z":
            out = self.local_name()
            self.subs.append(out)
            return out
        if c == "N" or c in "0123456789" or self.peek(2) == "St":
            saved = self.template_args
            name, args = self.name()
            self.template_args = saved
            out = name + (f"<{', '.join(args)}>" if args is not None else "")
            self.subs.append(out)
            return out
        raise _Fail


def demangle(symbol: str) -> Demangled | None:
    """The parts of an Itanium-mangled function symbol, or None when it is not one (extern "C"
    names) or uses what this subset does not read."""
    if not symbol.startswith("_Z") or len(symbol) > 4096:
        return None
    p = _Parser(symbol[2:])
    try:
        qualified, args = p.name()
        if args is not None:
            p.template_args = args
            p.type()  # a template instance encodes its return type
        params: list[str] = []
        while p.i < len(p.s) and p.peek() != ".":
            params.append(p.type())
        if params == ["void"]:
            params = []
    except (_Fail, ValueError, IndexError, RecursionError):
        return None
    name = qualified.rsplit("::", 1)[-1]
    return Demangled(qualified, name, tuple(args or ()), tuple(params))
