"""A look at a candidate's text before it runs (issue 12): what a cheating kernel needs.

- New mutable globals: `__device__`/`__managed__` variables the original did not declare (not
  `const`, not `__constant__`). State that outlives a launch is how results get memoised or
  launches counted; the runner restores globals before every launch, and an LLM candidate that
  adds one is rejected unless the settings allow it, or unless it is scratch that every use
  re-initialises first (`scratch_reset`, conservative):
  - the kernel writes it before anything reads it: a scalar whose first mention in every kernel
    that uses it is a plain assignment (not reading it), with no `return` before it, followed by
    a grid-wide sync (`grid.sync()` of `this_grid()`) before its next mention (`if (threadIdx.x
    == 0 && blockIdx.x == 0) d_sum = 0; grid.sync(); atomicAdd(&d_sum, ...)`); or
  - (an entry spec's launcher runs) every host function that launches a kernel using it resets
    all of it first, unconditionally, at the top of its body: `cudaMemcpyToSymbol(G, src,
    sizeof(G))` or `cudaMemset` of `cudaGetSymbolAddress(&p, G)` over `sizeof(G)` (a scalar's
    type's size too), before its first such launch.
  A counter (`atomicAdd(&calls, 1)` first), a memo read before it is written, an array the kernel
  fills itself, a reset in a branch or after the first launch: refused.
- Timer reads (`clock()`, `clock64()`, `%globaltimer`, `%clock`) whose value reaches a
  condition: a kernel that behaves differently depending on the time. Listed in the report.
- Inline `asm` blocks. Listed in the report.
- For an entry spec (its launcher runs too): new mutable host state, file-scope variables and
  `static` locals of the launcher, rejected like new `__device__` variables.

Text only, never raises: comments and string literals are blanked first (line numbers kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel_lsp.lexer import LITERALS, Token, arguments, blank, blank_comments, split_top

NEW_GLOBAL = "new_global"
SCRATCH_GLOBAL = "scratch_global"  # a new global re-initialised before every use: listed, allowed
TIMER_CONTROL = "timer_control"
ASM = "asm"


@dataclass(frozen=True)
class Finding:
    kind: str  # NEW_GLOBAL, SCRATCH_GLOBAL, TIMER_CONTROL, ASM
    line: int  # 1-based
    text: str  # what to say in the report

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def _keeps_timer_text(token: Token, text: str) -> bool:
    return token.kind in LITERALS and (("%" in text and "timer" in text) or "%clock" in text)


def _blank(source: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept), except the text of
    asm strings, which the timer check needs (`%globaltimer`)."""
    return blank(source, _keeps_timer_text)


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
    for part in split_top(head):
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


_NOT_VARIABLES = re.compile(
    r"^\s*(typedef|using|struct|class|union|enum|template|namespace|extern|static_assert|friend)\b"
)
_DEVICE_SPACES = re.compile(r"\b(__device__|__managed__|__constant__|__shared__)\b")
_STATIC_LOCAL = re.compile(
    r"\bstatic\s+(?!constexpr\b|inline\b|void\b|__)([\w:<>,\s*&]*?[\s*&])([A-Za-z_]\w*)\s*(?=[=;\[{(])"
)


def host_mutable_statics(source: str) -> dict[str, int]:
    """{name: line} of host state that outlives a call of a launcher: file-scope variables that
    are not `const` (and not device memory, see `mutable_globals`), and `static` locals of
    functions. The worker resets them before every call; a candidate that adds one is rejected
    like a new `__device__` variable."""
    from .file_items import top_items

    text = _blank(source)
    found: dict[str, int] = {}
    for item in top_items(source):
        body = text[item.start : item.end]
        if item.kind == "other" and item.name:
            head = body.split("=", 1)[0]
            if _NOT_VARIABLES.match(head) or _DEVICE_SPACES.search(head) or "(" in head:
                continue
            if _CONST.search(head.rsplit("*", 1)[-1]) or "#" in head.strip()[:1]:
                continue
            found.setdefault(item.name, _line_of(text, item.start + body.find(item.name)))
        elif item.kind in ("host", "block", "device"):
            for m in _STATIC_LOCAL.finditer(body):
                # In the body (not a `static` function), and writable: `static const int k` is
                # not, `static const float* p` is (the pointer changes).
                if body.find("{") < m.start() and not _CONST.search(m.group(1).rsplit("*", 1)[-1]):
                    found.setdefault(m.group(2), _line_of(text, item.start + m.start(2)))
    return found


def inspect_candidate(candidate: str, original: str, host: bool = False) -> list[Finding]:
    """What the report lists for a candidate: its new mutable globals, clock-steered control
    flow and asm blocks (the last two only where the original had fewer). `host`: its host code
    runs too (an entry spec's launcher): new mutable host statics count as new globals."""
    before = mutable_globals(original)
    findings = []
    for name, line in mutable_globals(candidate).items():
        if name in before:
            continue
        how, why = scratch_reset(candidate, name, host)
        if how:
            findings.append(Finding(SCRATCH_GLOBAL, line, f"new `__device__` scratch `{name}`: {how}"))
        else:
            findings.append(
                Finding(
                    NEW_GLOBAL, line, f"new mutable global `{name}` (state that outlives a launch: {why})"
                )
            )
    if host:
        had = host_mutable_statics(original)
        findings += [
            Finding(NEW_GLOBAL, line, f"new mutable host static `{name}` (state that outlives a call)")
            for name, line in host_mutable_statics(candidate).items()
            if name not in had
        ]
    if len(timer_control(candidate)) > len(timer_control(original)):
        findings += timer_control(candidate)
    if len(asm_blocks(candidate)) > len(asm_blocks(original)):
        findings += asm_blocks(candidate)
    return findings


# --- scratch globals: re-initialised before every use -------------------------------------------

_GRID_SYNC_CALL = re.compile(r"\bthis_grid\s*\(\s*\)\s*\.\s*sync\s*\(\s*\)")
_RESET_CALL = re.compile(r"\b(cudaMemcpyToSymbol(?:Async)?|cudaMemset(?:Async)?)\s*\(")
_LAUNCH = re.compile(
    r"\b([A-Za-z_]\w*)\s*(?:<[^<>;()]*(?:<[^<>;()]*>[^<>;()]*)*>)?\s*<<<|\bcudaLaunch\w*\s*\(\s*(?:\([^()]*\)\s*)?&?\s*([A-Za-z_]\w*)"
)


def scratch_reset(source: str, name: str, host: bool) -> tuple[str, str]:
    """(how every use of the new global `name` re-initialises it first, "") when it does, else
    ("", why not): see the module's docstring for the rule."""
    from kernel_lsp.constants import without_preprocessor
    from kernel_lsp.host_launch.scan import find_functions, statements

    code = without_preprocessor(blank_comments(source))
    spans = find_functions(code, source)
    kernels = [sp for sp in spans if "__global__" in sp.qualifiers]
    word = re.compile(rf"\b{re.escape(name)}\b")
    users = [sp for sp in kernels if word.search(code[sp.open : sp.close])]
    helpers = [
        sp
        for sp in spans
        if "__device__" in sp.qualifiers
        and "__global__" not in sp.qualifiers
        and word.search(code[sp.open : sp.close])
    ]
    if not users and not helpers:
        return "", "no kernel reads or writes it"
    declared = _declared_type(code, name)
    scalar = declared is not None and not declared[1]
    # 1. Every kernel that uses it writes it first, then syncs the grid.
    why_kernel = ""
    if helpers:
        why_kernel = f"the device function `{helpers[0].name}` uses it, which is not followed"
    elif not scalar:
        why_kernel = "an array (or of a type not read): a kernel that fills it is not followed"
    else:
        for sp in users:
            why_kernel = _written_first(code[sp.open + 1 : sp.close], name, word)
            if why_kernel:
                why_kernel = f"`{sp.name.rpartition('::')[2]}` {why_kernel}"
                break
    using = (
        {sp.name.rpartition("::")[2] for sp in users}
        if not helpers
        else {sp.name.rpartition("::")[2] for sp in kernels}
    )
    hosts = [sp for sp in spans if not {"__global__", "__device__"} & set(sp.qualifiers)]
    # Host code that reads it before a launch rewrites it sees the last call's value.
    reader = _host_reader(code, hosts, name, using) if host else ""
    if reader:
        return "", f"`{reader}` reads it on the host before its first launch that uses it"
    if not why_kernel:
        return "every kernel that uses it writes it before any read and syncs the grid after", ""
    # 2. The launcher resets it before the first launch that uses it, in every host function.
    if not host:
        return "", why_kernel
    launched_somewhere = False
    for sp in hosts:
        body = code[sp.open : sp.close]
        first = next(
            (m for m in _LAUNCH.finditer(body) if (m.group(1) or m.group(2)) in using),
            None,
        )
        if first is None:
            continue
        launched_somewhere = True
        at = sp.open + first.start()
        resets = [
            st
            for st in statements(code, sp.open, sp.close)
            if st.start < at
            and st.blocks == (sp.open,)
            and not st.conditional
            and not st.header
            and _resets(st.text, name, code[sp.open : at], declared)
        ]
        if not resets:
            fn = sp.name.rpartition("::")[2]
            return (
                "",
                f"{why_kernel}, and `{fn}` does not reset all of it (cudaMemcpyToSymbol or cudaMemset of its address over sizeof) before its first launch that uses it",
            )
    if not launched_somewhere:
        return "", f"{why_kernel}, and no host function of the file launches a kernel that uses it"
    return "every host function that launches a kernel using it resets all of it first", ""


def _host_reader(code: str, hosts: list, name: str, using: set[str]) -> str:
    """The host function that copies `name` (or memory at its address) out before its first
    launch of a kernel in `using` (all of its body when it launches none), else ""."""
    for sp in hosts:
        body = code[sp.open : sp.close]
        first = next((m for m in _LAUNCH.finditer(body) if (m.group(1) or m.group(2)) in using), None)
        head = body[: first.start()] if first else body
        if re.search(rf"\bcudaMemcpyFromSymbol\w*\s*\([^;]*?,\s*\(?\s*{re.escape(name)}\b", head):
            return sp.name.rpartition("::")[2]
        for p in re.findall(
            rf"cudaGetSymbolAddress\s*\(\s*(?:\([^()]*\)\s*)?&\s*([A-Za-z_]\w*)\s*,\s*{re.escape(name)}\s*\)",
            head,
        ):
            if re.search(rf"\bcudaMemcpy\w*\s*\([^;,]*,\s*(?:\([^()]*\)\s*)?{re.escape(p)}\b", head):
                return sp.name.rpartition("::")[2]
    return ""


def _declared_type(code: str, name: str) -> tuple[str, bool] | None:
    """(element type, is an array) of the `__device__`/`__managed__` declaration of `name`."""
    m = re.search(
        rf"(?:__device__|__managed__)[\w\s:*]*?\b([A-Za-z_][\w:]*)\s*\**\s*\b{re.escape(name)}\s*(\[)?", code
    )
    if not m:
        return None
    return m.group(1), m.group(2) is not None


def _written_first(body: str, name: str, word: re.Pattern[str]) -> str:
    """ "" when the kernel body's first mention of `name` is a plain assignment that does not read
    it, nothing returns before it, and a grid sync comes before its next mention; else why not."""
    first = word.search(body)
    if first is None:
        return ""
    after = body[first.end() :]
    assign = re.match(r"\s*=(?!=)", after)
    if not assign:
        return "reads or updates it before writing it"
    end = after.find(";")
    rhs = after[assign.end() : end if end >= 0 else len(after)]
    if word.search(rhs):
        return "reads it in the statement that writes it"
    if re.search(r"\breturn\b", body[: first.start()]):
        return "may return before writing it"
    plain, guard = _write_guard(body[: first.start()])
    if not plain:
        return "writes it first inside a loop or nested branch, which is not followed"
    if re.search(
        r"[A-Za-z_]\w*",
        re.sub(r"\b(threadIdx|blockIdx)\.[xyz]\b|\b\w+\s*\.\s*thread_rank\s*\(\s*\)|\d+", "", guard),
    ):
        return f"writes it only under `{' '.join(guard.split())}`, which names more than threads and blocks"
    rest = after[end + 1 :] if end >= 0 else ""
    following = word.search(rest)
    between = rest[: following.start()] if following else rest
    if not _grid_synced(body, between):
        return "writes it and uses it again without a grid-wide sync between (other blocks may read it first)"
    return ""


def _write_guard(head: str) -> tuple[bool, str]:
    """For the statement that starts at the end of `head` (a kernel body up to it): (whether it
    runs at most under one `if`, that `if`'s condition or ""). In a loop, an `else` or deeper
    than one block: (False, "")."""
    stack: list[int] = []
    for i, c in enumerate(head):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            stack.pop()
    if len(stack) > 1:
        return False, ""

    def segment(text: str) -> str:
        return text[max(text.rfind(";"), text.rfind("{"), text.rfind("}")) + 1 :].strip()

    conditions = []
    if stack:
        m = re.fullmatch(r"if\s*\((.*)\)", segment(head[: stack[0]]), re.S)
        if not m:
            return False, ""
        conditions.append(m.group(1))
    inner = segment(head)
    if inner:
        m = re.fullmatch(r"if\s*\((.*)\)", inner, re.S)
        if not m or stack:
            return False, ""
        conditions.append(m.group(1))
    if re.search(r"\b(for|while|do|else|switch)\b", " ".join(conditions)):
        return False, ""
    return True, " && ".join(conditions)


def _grid_synced(body: str, between: str) -> bool:
    """A grid-wide sync in `between`: `this_grid().sync()`, or `X.sync()` / `cg::sync(X)` /
    `grid_sync(X)` of an `X` the body takes from `this_grid()` or declares a `grid_group`."""
    if _GRID_SYNC_CALL.search(between):
        return True
    grids = set(re.findall(r"\b(?:auto|[\w:]*grid_group)\s+([A-Za-z_]\w*)\s*=\s*[\w:]*this_grid\s*\(", body))
    grids |= set(re.findall(r"\b[\w:]*grid_group\s+([A-Za-z_]\w*)\b", body))
    for g in grids:
        if re.search(rf"\b{g}\s*\.\s*sync\s*\(\s*\)|\b(?:[\w:]*sync)\s*\(\s*{g}\s*\)", between):
            return True
    return False


def _resets(statement: str, name: str, before: str, declared: tuple[str, bool] | None) -> bool:
    """Whether a host statement resets all of `name`: `cudaMemcpyToSymbol(name, src, sizeof(...))`
    or `cudaMemset(p, v, sizeof(...))` of a `p` that `cudaGetSymbolAddress(&p, name)` set before."""
    m = _RESET_CALL.search(statement)
    if not m:
        return False
    args = arguments(statement, m.end() - 1)
    if len(args) < 3:
        return False
    target, size = args[0], re.sub(r"\s+", "", args[2])
    if m.group(1).startswith("cudaMemcpyToSymbol"):
        if not re.fullmatch(rf"\(?\s*{re.escape(name)}\s*\)?", target):
            return False
    else:
        p = re.sub(r"^\(.*?\)\s*", "", target)
        got = re.search(
            rf"cudaGetSymbolAddress\s*\(\s*(?:\([^()]*\)\s*)?&\s*{re.escape(p)}\s*,\s*{re.escape(name)}\s*\)",
            before,
        )
        if not p or not got:
            return False
    sizes = {f"sizeof({name})", f"sizeof{name}"}
    if declared is not None and not declared[1]:
        sizes.add(f"sizeof({declared[0]})")
    return size in sizes
