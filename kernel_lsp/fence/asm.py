"""Inline assembly in a candidate. Two rules:

- a system call in any `asm` statement, device or not, is refused: `syscall`, `sysenter`,
  `int $0x80`, and directives that write raw bytes into the code (`.byte 0x0f, 0x05` is a
  `syscall` too). The template is read after C's escapes (`"sys\\x63all"`), and it must be
  string literals only: a template built from macros cannot be read here, so it is refused;
- any other `asm` is allowed only in a function that can only run on the GPU: its head says
  `__global__` or `__device__`, and nothing in it can make it a host function too (`__host__`,
  `host`, a macro of the candidate's that may expand to either, a preprocessor line inside it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .findings import Finding
from .text import CleanText, directives

_ASM = re.compile(r"\b(asm|__asm__|__asm)\b")
_QUALIFIERS = re.compile(r"\s*(volatile|__volatile__|__volatile|goto|inline)\b")
_STRING = re.compile(r'\s*(?:u8|u|U|L)?"')
_SYSCALL = re.compile(
    r"\b(syscall|sysenter|int\s*\$?\s*(?:0x80|128|80h)\b)"
    r"|(\.(?:byte|2byte|4byte|8byte|short|hword|word|value|long|quad|octa|ascii|asciz|string|incbin"
    r"|insn|inst|dc(?:\.\w)?)\b)",
    re.I,
)
# `constexpr`: with --expt-relaxed-constexpr, host code may call a `__device__ constexpr`
# function, and nvcc then compiles it for the host (its `#ifndef __CUDA_ARCH__` part included).
_HOST_WORDS = frozenset(["__host__", "host", "__host", "constexpr", "consteval"])
_DEVICE_WORDS = frozenset(["__global__", "__device__"])
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]+|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


@dataclass(frozen=True)
class Macros:
    """The candidate's own macros: object-like ones with their bodies (every definition's words
    together), and the names of function-like ones."""

    bodies: dict[str, set[str]]
    function_like: frozenset[str]


def macros_of(ct: CleanText) -> Macros:
    bodies: dict[str, set[str]] = {}
    function_like = set()
    for d in directives(ct):
        if d.name != "define":
            continue
        m = re.match(r"[ \t]+([A-Za-z_]\w*)(\()?(.*)$", d.rest)
        if not m:
            continue
        if m.group(2):
            function_like.add(m.group(1))
        else:
            bodies.setdefault(m.group(1), set()).update(_IDENT.findall(m.group(3)))
    return Macros(bodies, frozenset(function_like))


def unescape(literal: str) -> str:
    """A string literal's characters as the compiler stores them (C escapes undone)."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU" and len(e) > 1:
            return chr(int(e[1:], 16) % 0x110000)
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _SIMPLE_ESCAPES.get(e, e)

    return _ESCAPE.sub(one, literal)


def _template(ct: CleanText, start: int) -> tuple[str | None, int]:
    """The asm template after the keyword at `start`: (its text, the end offset), or (None, ...)
    when it is not string literals alone (a macro, a name)."""
    pos = start
    while m := _QUALIFIERS.match(ct.code, pos):
        pos = m.end()
    rest = ct.code[pos:]
    if not rest.lstrip().startswith("("):
        return None, pos  # `asm` as a name or in a macro body: not a statement the text shows
    pos += len(rest) - len(rest.lstrip()) + 1
    literals = {offset: body for offset, body in ct.strings}
    parts = []
    while True:
        m = _STRING.match(ct.code, pos)
        if not m:
            break
        quote = m.end() - 1
        if quote not in literals:
            return None, pos
        parts.append(unescape(literals[quote]))
        pos = quote + len(literals[quote]) + 2
    tail = ct.code[pos:].lstrip()
    if not parts or not tail.startswith((":", ")")):
        return None, pos
    return "".join(parts), pos


_DIRECTIVE_LINE = re.compile(r"^[ \t]*#.*$", re.M)


def _head(code: str, brace: int) -> str:
    """What stands before `brace` since the last statement, block or preprocessor line: a
    function's head. (A function whose head is split by `#if` lines has an empty head here, so
    it is not taken for device code.)"""
    start = max(code.rfind(";", 0, brace), code.rfind("}", 0, brace), code.rfind("{", 0, brace)) + 1
    for m in _DIRECTIVE_LINE.finditer(code, start, brace):
        start = max(start, m.end())
    return code[start:brace]


def _expanded(words: list[str], macros: Macros) -> list[str] | None:
    """The head's words with the candidate's object-like macros expanded (None: a function-like
    macro of the candidate's is in it, which this cannot expand)."""
    out, todo, seen = [], list(words), 0
    while todo:
        w = todo.pop()
        if w in macros.function_like:
            return None
        if w in macros.bodies and seen < 200:
            seen += 1
            todo.extend(macros.bodies[w])
            continue
        out.append(w)
    return out


# How many enclosing blocks are looked at for the function's head (namespaces, extern "C" and
# structs come first); code deeper in nothing but such blocks counts as host code.
_MAX_BLOCKS = 64


def open_braces(code: str, offsets: list[int]) -> dict[int, list[int]]:
    """For each offset (ascending), the outermost `_MAX_BLOCKS` braces open there, in one pass."""
    out: dict[int, list[int]] = {}
    opens: list[int] = []
    i = 0
    for offset in offsets:
        for j in range(i, offset):
            if code[j] == "{":
                opens.append(j)
            elif code[j] == "}" and opens:
                opens.pop()
        i = max(i, offset)
        out[offset] = opens[:_MAX_BLOCKS]
    return out


def may_run_on_host(ct: CleanText, opens: list[int], macros: Macros) -> bool:
    """Whether code inside the blocks `opens` (outermost first) can be host code: outside any
    function, or in a function whose head does not make it GPU-only beyond doubt."""
    code = ct.code
    for brace in opens:  # outermost first: the function that holds it
        head = _head(code, brace)
        if "(" not in head:
            continue  # a namespace, extern "C" or struct block: look further in
        words = _expanded(_IDENT.findall(head), macros)
        if words is None:
            return True
        return not (_DEVICE_WORDS & set(words)) or bool(_HOST_WORDS & set(words))
    return True


def asm_findings(ct: CleanText) -> list[Finding]:
    macros = macros_of(ct)
    out = []
    found = list(_ASM.finditer(ct.code))
    blocks = open_braces(ct.code, [m.start() for m in found])
    for m in found:
        line = ct.line_at(m.start())
        template, _ = _template(ct, m.end())
        if template is None:
            out.append(
                Finding(
                    "asm",
                    "inline assembly whose template is not plain string literals (a macro or a name)",
                    line,
                )
            )
            continue
        bad = _SYSCALL.search(template)
        if bad:
            what = bad.group(1) or bad.group(2)
            out.append(
                Finding(
                    "asm", f"inline assembly with `{what.strip()}` (a raw system call, or raw bytes)", line
                )
            )
        if may_run_on_host(ct, blocks[m.start()], macros):
            out.append(Finding("asm", "inline assembly in host code", line))
    return out
