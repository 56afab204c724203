"""NVRTC's and nvcc's compile logs → Diagnostics and per-kernel resources.

The log looks like this (verified with NVRTC 13):

    /abs/dir/file.cu(12): error: identifier "y" is undefined
      source line, indented two spaces
      ^                          <- caret line: column = caret index - 2 + 1
    file.cu(3): warning #177-D: variable "unused" was declared but never referenced
    ptxas info    : Compiling entry function '_Z2okPfi' for 'sm_90'
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem

nvcc's front end prints the same `file(line): error` + caret format, but its source line is the
preprocessed one (`__device__` shows as `__attribute__((device))`), so the caret's column is
re-anchored on the real line when the caller can give it. nvcc adds lines of its own
(`nvcc fatal   : Unknown option '-Xfoo'`, `nvcc warning : ...`), prints the ptxas frame line without
the `ptxas .` prefix, and with `-c` the host compiler's `file:line:col: error: ...` (g++) and the
assembler's `file:line: Error: ...`.

Parsing never fails: what is not understood is returned in `unparsed`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..model import Diagnostic, Severity

_HEADER = re.compile(
    r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)"
    r"(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$"
)
_SEVERITY = {
    "catastrophic error": Severity.ERROR,
    "error": Severity.ERROR,
    "warning": Severity.WARNING,
    "remark": Severity.INFO,
    "note": Severity.INFO,
}
_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_FRAME = re.compile(
    r"^(?:ptxas\s+\.\s+)?(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, "
    r"(?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")
_PTXAS_DIAG = re.compile(r"^ptxas (?P<sev>warning|error|fatal)\s*: (?P<msg>.*)$")
_NVCC_DIAG = re.compile(r"^nvcc (?P<sev>warning|error|fatal)\s*: (?P<msg>.*)$")
# g++: `file:12:5: error: ...`; the assembler: `file:12: Error: ...`.
_HOST_DIAG = re.compile(
    r"^(?P<path>[^:(]+(?::\\[^:]*)?):(?P<line>\d+):(?:(?P<col>\d+):)? "
    r"(?P<sev>fatal error|error|warning|note|Error|Warning): (?P<msg>.*)$"
)
_HOST_SEVERITY = {
    "fatal error": Severity.ERROR,
    "error": Severity.ERROR,
    "Error": Severity.ERROR,
    "warning": Severity.WARNING,
    "Warning": Severity.WARNING,
    "note": Severity.INFO,
}
# g++'s source excerpt (`    5 |   asm(...)`, `      |   ^~~`) and context lines say nothing new.
_HOST_NOISE = re.compile(
    r"^(\s+\d*\s*\|.*|\S.*: (In function|In member function|In instantiation of|At global scope).*"
    r"|\S.*: Assembler messages:|In file included from .*|\s+from .*)$"
)
_IGNORED = re.compile(
    r"^(Remark: The warnings can be suppressed.*|\d+ errors? detected in the compilation of.*"
    r"|.*(catastrophic )?errors? detected in the compilation of.*|[Cc]ompilation terminated\.?"
    r"|ptxas info\s*: (\d+ bytes gmem.*|Function properties for .*|Compile time = .*)"
    r"|ptxas\s+\.\s+.*|nvrtc: error: .*)$"
)


@dataclass
class RawResources:
    mangled: str
    arch: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0
    const_bytes: int = 0


@dataclass
class ParsedLog:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    resources: list[RawResources] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    # Option errors ("nvrtc: error: unrecognized option ...") concern the invocation, not a line.
    option_errors: list[str] = field(default_factory=list)


def parse_log(
    log: str, default_path: str = "", line_text: Callable[[str, int], str | None] | None = None
) -> ParsedLog:
    """`line_text(path, line)`: the real text of a source line, to re-anchor carets shown on
    preprocessed lines (nvcc)."""
    out = ParsedLog()
    lines = log.replace("\x00", "").splitlines()
    current: RawResources | None = None
    i = 0
    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        i += 1
        if not stripped:
            continue
        m = _HEADER.match(stripped)
        if m:
            col, end_col = 1, 0
            # Source line then caret line, both indented two spaces.
            if (
                i + 1 < len(lines)
                and lines[i].startswith("  ")
                and lines[i + 1].strip() == "^"
                and lines[i + 1].startswith("  ")
            ):
                col = max(1, lines[i + 1].index("^") - 2 + 1)
                shown = lines[i][2:]
                real = line_text(m.group("path") or default_path, int(m.group("line"))) if line_text else None
                if real is not None and real.rstrip() != shown.rstrip():
                    col = _anchor_column(shown, col, real)
                    shown = real
                end_col = _token_end(shown, col)
                i += 2
            message = m.group("msg").strip()
            # Some messages continue on indented lines that are not the source/caret pair.
            while i < len(lines) and lines[i].startswith("          ") and lines[i].strip():
                message += " " + lines[i].strip()
                i += 1
            out.diagnostics.append(
                Diagnostic(
                    path=m.group("path") or default_path,
                    line=int(m.group("line")),
                    col=col,
                    end_col=end_col,
                    severity=_SEVERITY[m.group("sev")],
                    code=m.group("code"),
                    message=message,
                )
            )
            continue
        m = _ENTRY.search(stripped)
        if m:
            current = RawResources(mangled=m.group("name"), arch=m.group("arch"))
            out.resources.append(current)
            continue
        m = _FRAME.search(stripped)
        if m and current is not None:
            current.stack_bytes = int(m.group("stack"))
            current.spill_store_bytes = int(m.group("st"))
            current.spill_load_bytes = int(m.group("ld"))
            continue
        m = _USED.search(stripped)
        if m and current is not None:
            current.registers = int(m.group("regs"))
            rest = m.group("rest")
            if s := _SMEM.search(rest):
                current.shared_bytes = int(s.group(1))
            if c := _CMEM.search(rest):
                current.const_bytes = int(c.group(1))
            if b := _BARRIERS.search(rest):
                current.barriers = int(b.group(1))
            continue
        m = _PTXAS_DIAG.match(stripped)
        if m:
            sev = Severity.WARNING if m.group("sev") == "warning" else Severity.ERROR
            out.diagnostics.append(
                Diagnostic(default_path, 1, 1, sev, m.group("msg").strip(), source="ptxas")
            )
            continue
        m = _NVCC_DIAG.match(stripped)
        if m:
            if m.group("sev") == "warning":
                out.diagnostics.append(
                    Diagnostic(default_path, 1, 1, Severity.WARNING, m.group("msg").strip(), source="nvcc")
                )
            else:
                out.option_errors.append(m.group("msg").strip())
            continue
        m = _HOST_DIAG.match(stripped)
        if m:
            out.diagnostics.append(
                Diagnostic(
                    path=m.group("path"),
                    line=int(m.group("line")),
                    col=int(m.group("col") or 1),
                    severity=_HOST_SEVERITY[m.group("sev")],
                    message=m.group("msg").strip(),
                    source="host compiler",
                )
            )
            continue
        if _HOST_NOISE.match(text):
            continue
        if stripped.startswith("nvrtc: error:"):
            out.option_errors.append(stripped.removeprefix("nvrtc: error:").strip())
            continue
        if _IGNORED.match(stripped):
            continue
        out.unparsed.append(text)
    return out


def _anchor_column(shown: str, col: int, real: str) -> int:
    """The column in the real line of the token the caret marks in the preprocessed line: where
    the rest of the shown line is found, else the occurrence of the token nearest the caret
    counted from the line's end (macros expand before the caret, rarely after it)."""
    start = col - 1
    rest = shown[start:].rstrip()
    if rest and (at := real.rfind(rest)) >= 0:
        return at + 1
    token = re.match(r"[A-Za-z_]\w*|\d[\w.]*|\S", shown[start:])
    if not token:
        return min(col, max(1, len(real)))
    hits = [h.start() for h in re.finditer(re.escape(token.group(0)), real)]
    if not hits:
        return min(col, max(1, len(real)))
    from_end = len(shown.rstrip()) - start
    return min(hits, key=lambda h: abs((len(real.rstrip()) - h) - from_end)) + 1


def _token_end(source_line: str, col: int) -> int:
    """Exclusive 1-based end column of the identifier or token starting at `col`."""
    start = col - 1
    if start >= len(source_line):
        return 0
    m = re.match(r"[A-Za-z_]\w*|\d[\w.]*|\S", source_line[start:])
    return col + len(m.group(0)) if m else 0


_MANGLED_NAME = re.compile(r"([0-9]{1,9})")  # bounded: int() refuses over 4300 digits


def source_name(mangled: str) -> str:
    """The unqualified function name of an Itanium-mangled entry ('_Z4vaddPKfS0_Pfi' -> 'vadd',
    '_ZN2ns3fooEv' -> 'foo', template instances '_Z3addILi4EEvPf' -> 'add'); extern "C" names come
    back unchanged."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    names: list[str] = []
    if rest.startswith("N"):
        rest = rest[1:]
        while rest and rest[0] in "rVK":
            rest = rest[1:]
        # ASCII digits only: str.isdigit() also accepts "²", which int() and the regex refuse.
        while (m := _MANGLED_NAME.match(rest)) is not None:
            n = int(m.group(1))
            names.append(rest[m.end() : m.end() + n])
            rest = rest[m.end() + n :]
            if rest.startswith("I"):  # template args of a nested name: skip to the end
                break
    else:
        m = _MANGLED_NAME.match(rest)
        if m:
            n = int(m.group(1))
            names.append(rest[m.end() : m.end() + n])
    return names[-1] if names else mangled
