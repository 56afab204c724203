"""The fence's look at a candidate's text, before it is compiled: includes, inline assembly,
attributes that run code at load time, pragmas, preprocessor tricks, macros over reserved names,
calls of dangerous functions, and reaching for libc other than by calling it (the object check
sees most of these too; the text gives the line).

Every check reads the text as the preprocessor does (text.py: splices undone, comments gone,
digraphs mapped), so `#inc\\<newline>lude`, `#/**/include`, `%:pragma` and `as\\<newline>m`
are the directives and keywords they are to the compiler."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .allowlists import ALLOWED_PRAGMAS, DANGEROUS, DENIED_ATTRIBUTES
from .asm import asm_findings
from .compiler_checks import FUNCTION_ARITHMETIC
from .findings import Finding
from .includes import include_findings
from .text import TRIGRAPH, CleanText, Directive, clean, directives
from .values import value_findings

_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((.*?)\)\)", re.S)
_STD_ATTRIBUTE = re.compile(r"\[\[(.*?)\]\]", re.S)
_PRAGMA_OPERATOR = re.compile(r"\b(_Pragma|__pragma)\b")
_PRAGMA_STRING = re.compile(r'\s*\(\s*"(?P<body>[^"\\]*)"\s*\)')
_CALL = re.compile(r"\b(" + "|".join(sorted(map(re.escape, DANGEROUS), key=len, reverse=True)) + r")\s*\(")
# Directives a launcher may use; the rest (`#line` and GCC's `# 12 "file"`, which rename the
# candidate in the compiler's messages; `#ident`, `#assert`, ...) are refused. The ones that
# read files are includes.py's.
_ALLOWED_DIRECTIVES = frozenset(
    [
        "define",
        "undef",
        "if",
        "ifdef",
        "ifndef",
        "elif",
        "elifdef",
        "elifndef",
        "else",
        "endif",
        "error",
        "warning",
        "pragma",
        "include",
    ]
)
_FILE_DIRECTIVES = frozenset(["include_next", "import", "embed"])


# A diagnostics pragma may not silence the warning the fence reads (compiler_checks.py), by its
# number or by a name this cannot map to one.
_DIAGNOSTIC_PRAGMA = re.compile(r"^\s*(nv_diag_\w+|diag_\w+)\b(.*)$", re.S)


def _pragma_finding(text: str, line: int) -> Finding | None:
    diag = _DIAGNOSTIC_PRAGMA.match(text)
    if diag and (FUNCTION_ARITHMETIC in diag.group(2) or re.search(r"[A-Za-z_]", diag.group(2))):
        return Finding("pragma", f"#pragma {text.strip()}: a diagnostic the fence reads, or one named", line)
    if ALLOWED_PRAGMAS.match(text):
        return None
    return Finding("pragma", f"#pragma {text.strip()}: only unroll, once and diagnostics", line)


def _directive_findings(dirs: Sequence[Directive]) -> list[Finding]:
    out = []
    for d in dirs:
        if d.name == "pragma":
            if finding := _pragma_finding(d.rest, d.line):
                out.append(finding)
        elif d.name in ("define", "undef"):
            m = re.match(r"[ \t]+([A-Za-z_]\w*)", d.rest)
            name = m.group(1) if m else ""
            if name.startswith("__") or re.match(r"_[A-Z]", name):
                out.append(
                    Finding(
                        "macro", f"#{d.name} {name}: a reserved name (the compiler's and CUDA's own)", d.line
                    )
                )
        elif d.name and d.name not in _ALLOWED_DIRECTIVES and d.name not in _FILE_DIRECTIVES:
            out.append(
                Finding(
                    "directive",
                    f"#{d.name}: not a directive a launcher needs (#line renames the file)",
                    d.line,
                )
            )
    return out


def _pragma_operator_findings(ct: CleanText) -> list[Finding]:
    """`_Pragma("...")`: allowed where `#pragma ...` is, and only with a plain string literal (one
    built by `#x` or a macro cannot be read here)."""
    out = []
    for m in _PRAGMA_OPERATOR.finditer(ct.code):
        line = ct.line_at(m.start())
        literal = _PRAGMA_STRING.match(ct.text, m.end())
        if m.group(1) == "__pragma" or literal is None:
            out.append(Finding("pragma", f"`{m.group(1)}` with anything but a plain string literal", line))
        elif finding := _pragma_finding(literal.group("body"), line):
            out.append(finding)
    return out


def _preprocessor_trick_findings(source: str, ct: CleanText) -> list[Finding]:
    out = []
    for m in TRIGRAPH.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        out.append(
            Finding("trigraph", f"the trigraph `{m.group(0)}` (compilers disagree on reading it)", line)
        )
    for m in re.finditer(r"##", ct.code):
        out.append(
            Finding(
                "macro",
                "token pasting (##): it builds names out of pieces (`_Pra ## gma`, `sys ## tem`) no check can "
                "read; write the name out",
                ct.line_at(m.start()),
            )
        )
    return out


def _allowed_hashes(dirs: Sequence[Directive], code: str) -> set[int]:
    """Offsets of the `#`s that are what they look like: a directive's own, any in a directive
    line but `#define`, and the stringizing `#param` of a function-like macro."""
    allowed = {d.hash_offset for d in dirs}
    for d in dirs:
        end = code.find("\n", d.rest_offset)
        end = len(code) if end < 0 else end
        if d.name != "define":
            allowed.update(i for i in range(d.rest_offset, end) if code[i] == "#")
            continue
        m = re.match(r"[ \t]+[A-Za-z_]\w*\(([^)]*)\)", code[d.rest_offset : end])
        if not m:
            continue  # object-like: a `#` in its body is emitted as a token where it is used
        params = set(re.findall(r"[A-Za-z_]\w*|\.\.\.", m.group(1))) | {"__VA_ARGS__"}
        for i in range(d.rest_offset + m.end(), end):
            after = re.match(r"#\s*([A-Za-z_]\w*)", code[i:end])
            if code[i] == "#" and after and after.group(1) in params:
                allowed.add(i)
    return allowed


def _stray_hash_findings(ct: CleanText, dirs: Sequence[Directive]) -> list[Finding]:
    """A `#` anywhere else: nvcc preprocesses twice (the host compiler's `-E`, whose output
    breaks lines where the source had splices and puts a macro's tokens where it is used, then
    cudafe++ reads that output as source), so `#define INC # include "x"` then `INC`, or a
    splice before `#include`, is a directive to the second reader that the first never saw."""
    allowed = _allowed_hashes(dirs, ct.code)
    out = []
    for m in re.finditer(r"(?<!#)#(?!#)", ct.code):
        if m.start() not in allowed:
            out.append(
                Finding(
                    "directive",
                    "a `#` that is not a directive's or a macro's `#param` (nvcc's second preprocessing "
                    "would read it as a directive)",
                    ct.line_at(m.start()),
                )
            )
    return out


def _attribute_findings(ct: CleanText) -> list[Finding]:
    out = []
    for pattern in (_ATTRIBUTE, _STD_ATTRIBUTE):
        for m in pattern.finditer(ct.code):
            words = set(re.findall(r"[A-Za-z_]\w*", m.group(1).replace("__", " ")))
            words |= set(re.findall(r"[A-Za-z_]\w*", m.group(1)))
            bad = sorted(w.strip("_") for w in words if w.strip("_") in DENIED_ATTRIBUTES)
            if bad:
                out.append(
                    Finding(
                        "attribute",
                        f"attribute `{bad[0]}` (code run at load or exit, placed or generated by hand)",
                        ct.line_at(m.start()),
                    )
                )
    return out


def _call_findings(ct: CleanText) -> list[Finding]:
    out = []
    code = ct.code
    for m in _CALL.finditer(code):
        name = m.group(1)
        before = code[max(0, m.start() - 2) : m.start()]
        if before.endswith((".", "->")) or (
            before.endswith("::") and not code[: m.start()].endswith("std::")
        ):
            continue  # a member of the candidate's own type
        out.append(Finding("call", f"calls `{name}`, which {DANGEROUS[name]}", ct.line_at(m.start()), name))
    return out


def check_files_read(
    source: str,
    original_source: str | None,
    original_path: str | None = None,
    include_dirs: Sequence[str] = (),
) -> list[Finding]:
    """The part of `check_source` that keeps a compiler from reading a file the candidate names
    (includes, #embed and the like, directive and pragma tricks): for a kernel-only candidate an
    LLM wrote, whose device code runs in the judge's accused process but whose compile would
    otherwise read any file into the kernel (`{ #include "~/.ssh/id_rsa" }`) or its errors."""
    ct = clean(source)
    dirs = directives(ct)
    out = include_findings(ct, original_source, original_path, include_dirs)
    out += _preprocessor_trick_findings(source, ct)
    out += _directive_findings(dirs)
    out += _stray_hash_findings(ct, dirs)
    out += _pragma_operator_findings(ct)
    return sorted(out, key=lambda f: f.line)


def check_source(
    source: str,
    original_source: str | None,
    original_path: str | None = None,
    include_dirs: Sequence[str] = (),
) -> list[Finding]:
    """Findings in a candidate's text. `original_source`: the user's file; a header it includes
    is the user's own and stays allowed. `original_path`, `include_dirs`: where the original's
    headers are found (an include of one must resolve inside them)."""
    ct = clean(source)
    out = check_files_read(source, original_source, original_path, include_dirs)
    out += asm_findings(ct)
    out += _attribute_findings(ct)
    out += _call_findings(ct)
    out += value_findings(ct)
    return sorted(out, key=lambda f: f.line)
