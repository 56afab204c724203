"""The fence's look at a candidate's text, before it is compiled: includes, host `asm`, attributes
that run code at load time, pragmas, macros over reserved names, and calls of dangerous
functions (the object check sees these too; the text gives the line)."""

from __future__ import annotations

import re

from ..source import blank_comments, find_includes
from .allowlists import ALLOWED_PRAGMAS, DANGEROUS, DENIED_ATTRIBUTES, allowed_header
from .findings import Finding

_ASM = re.compile(r"\b(asm|__asm__|__asm)\b")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((.*?)\)\)", re.S)
_STD_ATTRIBUTE = re.compile(r"\[\[(.*?)\]\]", re.S)
_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma\b(.*)$|\b_Pragma\s*\(|__pragma\s*\(", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)", re.M)
_COMPUTED_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[^<\"\s]", re.M)
_CALL = re.compile(r"\b(" + "|".join(sorted(map(re.escape, DANGEROUS), key=len, reverse=True)) + r")\s*\(")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _device_only_function_at(code: str, offset: int) -> bool:
    """Whether `offset` lies in the body of a `__global__` or `__device__` (not `__host__`)
    function: device code, where inline PTX is ordinary."""
    depth, opens = 0, []
    for i in range(offset):
        ch = code[i]
        if ch == "{":
            opens.append(i)
            depth += 1
        elif ch == "}" and opens:
            opens.pop()
            depth -= 1
    for brace in opens:  # outermost first: the function that holds it
        start = max(code.rfind(";", 0, brace), code.rfind("}", 0, brace), code.rfind("{", 0, brace))
        head = code[start + 1 : brace]
        if "(" not in head:
            continue  # a namespace, extern "C" or struct block: look further in
        return ("__global__" in head or "__device__" in head) and "__host__" not in head
    return False


def check_source(source: str, original_source: str | None) -> list[Finding]:
    """Findings in a candidate's text. `original_source`: the user's file; a quoted include it has
    is the user's own header and stays allowed."""
    code = blank_comments(source)
    out: list[Finding] = []
    original_includes = {i.target for i in find_includes(original_source or "")}
    for inc in find_includes(source):
        if inc.target in original_includes or (not inc.quoted and allowed_header(inc.target)):
            continue
        out.append(
            Finding(
                "include",
                f"#include {'“' + inc.target + '”' if inc.quoted else '<' + inc.target + '>'} is outside the "
                "CUDA and C/C++ standard headers"
                + (" and not included by the original file" if inc.quoted else ""),
                inc.line,
            )
        )
    for m in _COMPUTED_INCLUDE.finditer(code):
        out.append(
            Finding("include", "a computed #include (a macro names the header)", _line(code, m.start()))
        )
    for m in _ASM.finditer(code):
        if not _device_only_function_at(code, m.start()):
            out.append(Finding("asm", "inline assembly in host code", _line(code, m.start())))
    for pattern in (_ATTRIBUTE, _STD_ATTRIBUTE):
        for m in pattern.finditer(code):
            words = set(re.findall(r"[A-Za-z_]\w*", m.group(1).replace("__", " ")))
            words |= set(re.findall(r"[A-Za-z_]\w*", m.group(1)))
            bad = sorted(w.strip("_") for w in words if w.strip("_") in DENIED_ATTRIBUTES)
            if bad:
                out.append(
                    Finding(
                        "attribute",
                        f"attribute `{bad[0]}` (code run at load or exit, or placed by hand)",
                        _line(code, m.start()),
                    )
                )
    for m in _PRAGMA.finditer(code):
        text = m.group(1)
        if text is not None and ALLOWED_PRAGMAS.match(text):
            continue
        shown = (text or m.group(0)).strip()
        out.append(
            Finding("pragma", f"#pragma {shown}: only unroll, once and diagnostics", _line(code, m.start()))
        )
    for m in _MACRO.finditer(code):
        name = m.group(2)
        if name.startswith("__") or re.match(r"_[A-Z]", name):
            out.append(
                Finding(
                    "macro",
                    f"#{m.group(1)} {name}: a reserved name (the compiler's and CUDA's own)",
                    _line(code, m.start()),
                )
            )
    for m in _CALL.finditer(code):
        name = m.group(1)
        before = code[max(0, m.start() - 2) : m.start()]
        if before.endswith((".", "->")) or (
            before.endswith("::") and not code[: m.start()].endswith("std::")
        ):
            continue  # a member of the candidate's own type
        out.append(Finding("call", f"calls `{name}`, which {DANGEROUS[name]}", _line(code, m.start()), name))
    return out
