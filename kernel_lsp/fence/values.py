"""Host code that goes looking for libc instead of calling it: a library function's address
(from which `system` is a fixed offset away), a function pointer turned into a number or moved
by arithmetic (a jump into the middle of code), the loader's tables and the process's memory map
(`dl_iterate_phdr`, `_r_debug`, `/proc/self/maps`), the stack's return addresses
(`__builtin_frame_address`), and the `FILE` objects `stdout`/`stderr` (libc's own data) used as
anything but the stream a print writes to.

These are text checks, each with its line. The object check (object_checks.py) sees every
address of an imported function the compiler emits, whatever the text did to hide it. Neither
can stop pointer arithmetic on data in general (any pointer into a library leads to that
library's tables); the sandboxed worker is the wall behind these checks."""

from __future__ import annotations

import re

from ..lexer import enclosing_paren, matching
from .allowlists import FUNCTION_VALUE_NAMES, PRINT_STREAM_FUNCTIONS, REFUSED_BUILTINS, SYMBOL_WALKERS
from .findings import Finding
from .text import CleanText

_IDENT = re.compile(r"[A-Za-z_]\w*")
_WALKER = re.compile(
    r"\b(" + "|".join(sorted(SYMBOL_WALKERS, key=len, reverse=True)) + r"|__libc_\w+|_dl_\w+)\b"
)
_BUILTIN = re.compile(
    r"\b(" + "|".join(sorted(REFUSED_BUILTINS, key=len, reverse=True)) + r"|__builtin_ia32_\w+)\b"
)
_VALUE_NAME = re.compile(r"\b(" + "|".join(sorted(FUNCTION_VALUE_NAMES, key=len, reverse=True)) + r")\b")
_STREAM = re.compile(r"\b(stdout|stderr|stdin)\b")
_PROC_PATH = re.compile(r"/proc/|/dev/mem|/sys/kernel")
# A function name, then a `{` after its parameters (a definition), skipping `const`, `noexcept`
# and attributes; good enough to know which names are the candidate's functions.
_DEFINITION = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_CAST = re.compile(
    r"(?:\((?P<ctype>\s*[\w\s:*&<>,]+?)\)"
    r"|\b(?:reinterpret_cast|static_cast|const_cast|bit_cast)\s*<\s*(?P<ttype>[\w\s:*&<>,]+?)\s*>)"
    r"\s*\(?\s*&?\s*$"
)
# The words of a type a function's address could be cast to: any pointer, or an integer.
_NUMBER_TYPE = re.compile(
    r"\b(char|short|int|long|unsigned|signed|size_t|ssize_t|ptrdiff_t|u?intptr_t|u?int(8|16|32|64)_t|"
    r"uint|ulong|bool|float|double)\b"
)
_BEFORE_CAST_WORDS = frozenset(["return", "case", "throw", "else", "do", "co_return", "co_yield"])
_VOID_POINTER = re.compile(r"^(const\s+)?void\s*\*(\s*const)?$")
_NOT_FUNCTIONS = frozenset(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "alignof",
        "decltype",
        "catch",
        "__launch_bounds__",
        "__attribute__",
        "__declspec",
        "alignas",
        "static_assert",
        "noexcept",
        "defined",
    ]
)


def _before(code: str, start: int) -> str:
    return code[max(0, start - 160) : start]


def _member_or_scoped(code: str, start: int) -> bool:
    """`x.name`, `p->name`, `Type::name`: a member of some type, not the library's function
    (`std::name` and `::name` are the library's)."""
    before = code[max(0, start - 2) : start]
    if before.endswith((".", "->")):
        return True
    if not before.endswith("::"):
        return False
    scope = re.search(r"([A-Za-z_]\w*|>)\s*::$", code[max(0, start - 200) : start])
    return scope is not None and scope.group(1) != "std"


def _after_template_args(code: str, end: int) -> int:
    """Where `name<...>` ends when `<...>` follows `end` (else `end`): `f<float>(x)` is a call."""
    i = end
    while i < len(code) and code[i] in " \t\n":
        i += 1
    if code.startswith("<<<", i) or not code.startswith("<", i):
        return end
    close = matching(code, i, end=i + 400, stop=";{}")
    return close + 1 if close >= 0 else end


def _followed_by_call(code: str, end: int) -> bool:
    """`name(`, `name<T>(` or a launch `name<<<` / `name<T><<<`."""
    rest = code[_after_template_args(code, end) :].lstrip()
    return rest.startswith(("(", "<<<"))


def _using_declaration(code: str, start: int) -> bool:
    line_start = code.rfind("\n", 0, start) + 1
    return re.match(r"\s*using\b", code[line_start:start]) is not None


def _arithmetic_after(code: str, end: int) -> bool:
    """`+ n`, `- n` or `[n]` right after an expression (not `->`, `++`, `--`, `+=`...)."""
    rest = code[end:].lstrip()
    rest = rest[1:].lstrip() if rest.startswith(")") else rest  # `(T)(f) + 1`
    return bool(re.match(r"(\+(?![+=])|-(?![->=])|\[)", rest))


def _address_of(code: str, start: int) -> bool:
    before = code[:start].rstrip()
    return before.endswith("&") and not before.endswith("&&")


def _one_cast_before(code: str, start: int) -> tuple[str, int] | None:
    """The type of a cast applied right before `start` and where the cast begins (None: no
    cast). A C-style cast's parentheses must not be a call's, an `if`'s or a macro's
    (`f (x) name`), and what is inside must read as a pointer or integer type."""
    before = _before(code, start)
    m = _CAST.search(before)
    if m is None:
        return None
    if m.group("ctype") is not None:
        ahead = before[: m.start()].rstrip()
        word = re.search(r"[A-Za-z_]\w*$", ahead)
        if ahead.endswith((")", "]")) or (word and word.group(0) not in _BEFORE_CAST_WORDS):
            return None
        cast = m.group("ctype")
        if "*" not in cast and not _NUMBER_TYPE.search(cast):
            return None
    kind = re.sub(r"\s+", " ", (m.group("ctype") or m.group("ttype") or "").strip())
    return kind, start - len(before) + m.start()


def _cast_before(code: str, start: int) -> str | None:
    """The cast applied to what starts at `start`, through a chain of them: the first that is
    not to `void*` (`(char*)(void*)f` is a cast to `char*`), else `void*`; None: no cast."""
    found = None
    for _ in range(8):
        cast = _one_cast_before(code, start)
        if cast is None:
            break
        found, start = cast
        if not _VOID_POINTER.match(found):
            break
    return found


def candidate_functions(code: str) -> set[str]:
    """Names of the functions the candidate defines (kernels and host functions)."""
    names = set()
    for m in _DEFINITION.finditer(code):
        name = m.group(1)
        if name in _NOT_FUNCTIONS:
            continue
        limit = m.end() + 2000  # a parameter list is not longer
        close = matching(code, m.end() - 1, end=limit)
        i = close if close >= 0 else min(len(code), limit)
        tail = code[i + 1 : i + 200]
        if re.match(r"\s*(const\b\s*|noexcept\b\s*|__attribute__\s*\(\(.*?\)\)\s*|->[^{;]*)*\{", tail, re.S):
            names.add(name)
    return names


def _library_function_values(ct: CleanText) -> list[Finding]:
    out = []
    for m in _VALUE_NAME.finditer(ct.code):
        name = m.group(1)
        if _followed_by_call(ct.code, m.end()) or _member_or_scoped(ct.code, m.start()):
            continue
        if _using_declaration(ct.code, m.start()):
            continue
        out.append(
            Finding(
                "address",
                f"uses the library function `{name}` as a value (its address), not by calling it",
                ct.line_at(m.start()),
                name,
            )
        )
    return out


def _own_function_values(ct: CleanText) -> list[Finding]:
    """A cast of one of the candidate's functions to anything but `void*` (a number, a byte
    pointer), or arithmetic on its address: a jump into the middle of compiled code. A kernel
    passed to the runtime as `(void*)kernel` stays allowed."""
    out: list[Finding] = []
    names = candidate_functions(ct.code)
    if not names:
        return out
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    for m in pattern.finditer(ct.code):
        if _followed_by_call(ct.code, m.end()) or _member_or_scoped(ct.code, m.start()):
            continue
        end = _after_template_args(ct.code, m.end())
        cast = _cast_before(ct.code, m.start())
        if cast is not None and not _VOID_POINTER.match(cast):
            why = f"casts the function `{m.group(1)}` to `{cast}`"
        elif (cast is not None or _address_of(ct.code, m.start())) and _arithmetic_after(ct.code, end):
            why = f"does arithmetic on the address of the function `{m.group(1)}`"
        else:
            continue
        out.append(
            Finding(
                "address",
                f"{why} (only `(void*){m.group(1)}`, as the runtime takes it)",
                ct.line_at(m.start()),
            )
        )
    return out


def _enclosing_call(code: str, start: int) -> str:
    """The name of the call whose argument list holds `start` ('' when none)."""
    open_ = enclosing_paren(code, start, stop=";{}", limit=1999)
    m = re.search(r"([A-Za-z_]\w*)\s*$", code[:open_]) if open_ >= 0 else None
    return m.group(1) if m else ""


def _stream_values(ct: CleanText) -> list[Finding]:
    out = []
    for m in _STREAM.finditer(ct.code):
        if _member_or_scoped(ct.code, m.start()):
            continue
        before = ct.code[: m.start()].rstrip()
        after = ct.code[m.end() :].lstrip()
        plain_argument = before.endswith(("(", ",")) and after.startswith((",", ")"))
        if plain_argument and _enclosing_call(ct.code, m.start()) in PRINT_STREAM_FUNCTIONS:
            continue
        out.append(
            Finding(
                "address",
                f"`{m.group(1)}` used other than as the stream of a print call (it points into libc)",
                ct.line_at(m.start()),
                m.group(1),
            )
        )
    return out


def value_findings(ct: CleanText) -> list[Finding]:
    """Every way the text reaches for libc or the loader other than by calling an allowed function."""
    out = [
        Finding(
            "symbol-walk",
            f"`{m.group(1)}` walks the loader's or the process's tables",
            ct.line_at(m.start()),
            m.group(1),
        )
        for m in _WALKER.finditer(ct.code)
    ]
    out += [
        Finding(
            "builtin",
            f"`{m.group(1)}` reads the stack, the thread pointer or raw machine state",
            ct.line_at(m.start()),
            m.group(1),
        )
        for m in _BUILTIN.finditer(ct.code)
    ]
    out += [
        Finding(
            "string",
            f"the string names {m.group(0)!r} (the process's own map or the kernel's files)",
            ct.line_at(offset),
        )
        for offset, body in ct.strings
        if (m := _PROC_PATH.search(body))
    ]
    return out + _library_function_values(ct) + _own_function_values(ct) + _stream_values(ct)
