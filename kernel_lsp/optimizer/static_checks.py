"""A look at a candidate's text before it runs (issue 12): what a cheating kernel needs.

- New mutable globals: `__device__`/`__managed__` variables the original did not declare (not
  `const`, not `__constant__`). State that outlives a launch is how results get memoised or
  launches counted; the runner restores globals before every launch, and an LLM candidate that
  adds one is rejected unless the settings allow it.
- Timer reads (`clock()`, `clock64()`, `%globaltimer`, `%clock`) whose value reaches a
  condition: a kernel that behaves differently depending on the time. Listed in the report.
- Inline `asm` blocks. Listed in the report.

Text only, never raises: comments and string literals are blanked first (line numbers kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NEW_GLOBAL = "new_global"
TIMER_CONTROL = "timer_control"
ASM = "asm"


@dataclass(frozen=True)
class Finding:
    kind: str  # NEW_GLOBAL, TIMER_CONTROL, ASM
    line: int  # 1-based
    text: str  # what to say in the report

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def _blank(source: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept), except the text of
    asm strings, which the timer check needs (`%globaltimer`)."""
    out = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            literal = source[i:j]
            # Keep string contents that name a timer register; blank everything else.
            out.append(
                literal
                if ("%" in literal and "timer" in literal) or "%clock" in literal
                else " " * len(literal)
            )
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


_SCOPE_OPENERS = re.compile(r"^\s*(namespace\b[^{]*|extern\s*\"C\"\s*)$")
_FUNCTION_QUALIFIERS = re.compile(r"\b(__global__|__host__)\b")
_CONST = re.compile(r"\b(const|constexpr|__constant__)\b")


def mutable_globals(source: str) -> dict[str, int]:
    """{name: line} of the file-scope `__device__`/`__managed__` variables that kernels can
    write."""
    # Preprocessor lines hold no declarations, but their parentheses would read as a function's.
    text = re.sub(r"(?m)^[ \t]*#(?:.*\\\n)*.*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), _blank(source))
    found: dict[str, int] = {}
    depth = 0
    scopes: list[bool] = []  # per open brace: does it open a namespace (file scope continues)?
    start = 0
    for i, ch in enumerate(text):
        if ch == "{":
            segment = text[start:i]
            is_scope = bool(_SCOPE_OPENERS.match(segment.replace("\n", " "))) and depth == 0
            if depth == 0 and not is_scope and "=" in segment:
                _declaration(segment, start, text, found)  # `__device__ int t[2] = {1, 2};`
            scopes.append(is_scope)
            if not is_scope:
                depth += 1
            start = i + 1
        elif ch == "}":
            if scopes and not scopes.pop():
                depth -= 1
            start = i + 1
        elif ch == ";":
            if depth == 0:
                _declaration(text[start:i], start, text, found)
            start = i + 1
    return found


def _declaration(segment: str, offset: int, text: str, found: dict[str, int]) -> None:
    if not re.search(r"\b(__device__|__managed__)\b", segment):
        return
    head = segment.split("=", 1)[0]
    if _FUNCTION_QUALIFIERS.search(segment) or "(" in head:  # a function
        return
    # `const float* p` is a writable pointer; `float* const p` and `const float x` are not.
    if _CONST.search(head.rsplit("*", 1)[-1]) or "__constant__" in head or "constexpr" in head:
        return
    for part in head.split(","):
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", part.strip())
        if m and m.group(1) not in ("__device__", "__managed__"):
            pos = offset + segment.find(m.group(1))
            found.setdefault(m.group(1), _line_of(text, pos))


_TIMER = re.compile(r"\bclock64\s*\(\s*\)|\bclock\s*\(\s*\)|%globaltimer|%clock64|%clock\b")
_CONDITION = re.compile(r"\b(if|while)\s*\(|\?")


def timer_control(source: str) -> list[Finding]:
    """Timer reads whose value (directly or through the variable it is stored in) appears in an
    `if`/`while`/`for` condition or a `?:`."""
    text = _blank(source)
    lines = text.splitlines()
    raw = source.splitlines()
    tainted: set[str] = set()
    for no, line in enumerate(lines):
        if _TIMER.search(line):
            for m in re.finditer(r"([A-Za-z_]\w*)\s*(?:\+|-)?=(?!=)", line):
                tainted.add(m.group(1))
            # asm outputs (`"=l"(now)`): the constraint string is blanked in `line`.
            for m in re.finditer(r"\"=[a-z]\"\s*\(\s*([A-Za-z_]\w*)\s*\)", raw[no] if no < len(raw) else ""):
                tainted.add(m.group(1))
    out = []
    for no, line in enumerate(lines, 1):
        cond = _condition_text(line)
        if cond is None:
            continue
        names = {w for w in re.findall(r"[A-Za-z_]\w*", cond)}
        if _TIMER.search(cond) or names & tainted:
            what = ", ".join(sorted(names & tainted)) or "a timer read"
            out.append(Finding(TIMER_CONTROL, no, f"control flow depends on the clock ({what})"))
    return out


def _condition_text(line: str) -> str | None:
    m = re.search(r"\b(if|while|for)\s*\((.*)", line)
    if m:
        return m.group(2)
    if "?" in line and ":" in line:
        return line.split("?", 1)[0]
    return None


_ASM = re.compile(r"\b(asm|__asm__|__asm)\b\s*(volatile|__volatile__)?\s*\(")


def asm_blocks(source: str) -> list[Finding]:
    text = _blank(source)
    return [Finding(ASM, _line_of(text, m.start()), "inline asm block") for m in _ASM.finditer(text)]


def inspect_candidate(candidate: str, original: str) -> list[Finding]:
    """What the report lists for a candidate: its new mutable globals, clock-steered control
    flow and asm blocks (the last two only where the original had fewer)."""
    before = mutable_globals(original)
    findings = [
        Finding(NEW_GLOBAL, line, f"new mutable global `{name}` (state that outlives a launch)")
        for name, line in mutable_globals(candidate).items()
        if name not in before
    ]
    if len(timer_control(candidate)) > len(timer_control(original)):
        findings += timer_control(candidate)
    if len(asm_blocks(candidate)) > len(asm_blocks(original)):
        findings += asm_blocks(candidate)
    return findings
