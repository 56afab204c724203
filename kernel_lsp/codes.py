"""Diagnostic codes: what each one means, and which findings a `select`/`ignore` selection keeps.

A finding's code is the compiler's number where it gives one (NVRTC and nvcc share EDG's front
end: `177-D` is the same warning in both), else a name of kernel-lsp's own (`spill`,
`spec-args`, `gpu-mismatch`). Compile errors carry no number (NVRTC has no option to show one);
their rule is the compiler's (`nvrtc-error`, `nvcc-error`, ...), see `rule_id`.

Selection follows ruff: a selector is a code or a prefix of one (`spec-` is every spec code), the
most specific matching selector wins and `ignore` wins a tie. A number selects that number only
(`177` is `177-D`, never `1770-D`: EDG's numbers are not a hierarchy). Some findings stay whatever
the selection says: compile errors (the compiler stopped, so nothing after them is known) and the
findings that say a file was not checked at all; hiding those would report a file as clean that
nobody looked at."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .model import Diagnostic, Severity

# kernel-lsp's own codes. A prefix family (`spec-`, `gpu-`) describes the codes it starts
# unless the code has an entry of its own.
DESCRIPTIONS: dict[str, str] = {
    # compiling
    "spill": "Registers spilled to local memory: the kernel reads and writes its spilled values "
    "through local memory (the L1/L2 caches and DRAM), which is slow",
    "host-code": "Host code in a file NVRTC compiles: NVRTC compiles device code only; guard the host "
    "part with #ifndef __CUDACC_RTC__ or let nvcc compile the file (compiler = auto or nvcc)",
    "needs-nvcc": "A file only nvcc can check (NVRTC does not see it as nvcc does), where nvcc or "
    "its host compiler is missing: the file was not checked",
    "option": "The compiler rejected its invocation (an option from the settings, the flags or "
    "compile_commands.json)",
    "arch": "A target arch this CUDA cannot compile for",
    "nvrtc": "NVRTC could not run (its wheels are missing or broken): the file was not checked",
    "nvcc": "nvcc could not run or failed without a message: the file was not checked",
    "nvcc-path": "The nvcc or host compiler a setting names cannot be used",
    "nvcc-link": "The host-entry spec's shared library did not link (nvcc -shared): it cannot be "
    "verified or timed",
    "define": "A define that cannot be passed to the compiler",
    "compile-commands": "compile_commands.json cannot be used for this file: it was checked with "
    "the settings' flags only",
    "torch": "A PyTorch extension whose torch headers cannot be found: the file was not checked",
    "context": "A header that does not compile on its own, checked as the file that includes it sees it",
    "include-not-regular": "An #include of something that is not a regular file (a FIFO, a device, "
    "a file over the size limit)",
    # reading files
    "not-checked": "The file was not checked: binary, too large, unreadable or gone",
    "not-utf8": "The file is not UTF-8: it was checked with each undecodable byte read as ?",
    # the check itself
    "timeout": "The check was stopped at its deadline (a spec that never returns?)",
    "crash": "The process checking the file crashed",
    "crashed": "The process checking the file ended before it answered (NVRTC or the file's spec crashed it)",
    "internal": "kernel-lsp failed while checking the file (a bug: please report it)",
    "disk-full": "The temporary folder is full: the file was not checked",
    "not-checked-in-time": "The compile did not finish within its time limit: nothing is known about "
    "the file",
    "out-of-memory": "The compiler ran out of memory under its limit: the file was not checked",
    # launch comments
    "launch-comment": "A `// kernel-lsp: launch|tune` comment that does not parse or cannot launch",
    # specs (kernel_lsp/spec/, docs/specs.md)
    "spec-": "A problem with the kernel's spec (the X.spec.py beside it)",
    "spec-read": "The spec file cannot be read",
    "spec-syntax": "The spec is not valid Python",
    "spec-exception": "The spec raised an exception while it was loaded",
    "spec-missing": "The spec file defines no SPEC or SPECS",
    "spec-type": "A spec value of the wrong type",
    "spec-sizes": "The spec's sizes are not a list of name-to-int mappings",
    "spec-reference": "The spec's reference is missing or not a function",
    "spec-args": "The spec's args do not match the kernel's parameters",
    "spec-dtype": "An argument's dtype does not match the kernel parameter's type",
    "spec-shape": "An argument's shape cannot be computed from the sizes",
    "spec-dist": "An input distribution that cannot be drawn",
    "spec-kernel": "The spec names a kernel the file does not define",
    "spec-entry": "The spec's host entry (entry=) is missing from the file, or the GPU worker cannot "
    "call it through the C ABI",
    "spec-baseline": "The spec's baseline= is missing its entry=, or names a file that does not exist",
    "spec-launch": "The spec's launch (grid, block, shared memory) does not fit the kernel",
    "spec-dry-run": "The spec's reference failed a dry run on the CPU",
    "spec-todo": "The spec still has a TODO the skeleton left",
    "no-spec": "A kernel without a spec is not verified on a GPU",
    # GPU verification (kernel_lsp/runner/verify.py's problems)
    "gpu-": "The kernel failed its verification on the GPU",
    "gpu-mismatch": "The kernel's output differs from the spec's reference",
    "gpu-unwritten": "The kernel left part of an output unwritten",
    "gpu-guard": "The kernel wrote outside an output buffer (its guard bytes changed)",
    "gpu-input-modified": "The kernel changed one of its inputs",
    "gpu-race": "Two runs on the same inputs gave different outputs (a race?)",
    "gpu-baseline-mismatch": "The candidate's output differs from the original kernel's",
    "gpu-crash": "The kernel crashed the GPU worker (an illegal address?)",
    "gpu-timeout": "The kernel did not finish within its time limit",
    "gpu-launch-error": "The kernel could not be launched",
    "gpu-spec-error": "The spec failed while inputs or the reference were computed",
    "gpu-suspicious": "A timing that no honest kernel reaches (over the roofline bound)",
}

# Codes that say the file was not (fully) checked: never hidden by a selection.
CHECK_FAILURES = frozenset(
    {
        "nvrtc",
        "nvcc",
        "nvcc-link",
        "arch",
        "option",
        "host-code",
        "needs-nvcc",
        "torch",
        "not-checked",
        "timeout",
        "crash",
        "crashed",
        "internal",
        "disk-full",
        "not-checked-in-time",
        "out-of-memory",
        "include-not-regular",
    }
)
# Sources whose findings are kernel-lsp's own (the others are a compiler's).
OWN_SOURCES = frozenset({"kernel-lsp", "kernel-lsp spec", "kernel-lsp gpu", "kernel-lsp link"})

_NUMBER = re.compile(r"#?(\d+)(?:-D)?", re.IGNORECASE)
_QUOTED = re.compile(r'"[^"]*"')
_ARCH_LIST = re.compile(r" \[(?:sm|compute)_\w+(?:, (?:sm|compute)_\w+)*\]$")


def is_number(code: str) -> bool:
    """`177-D`, `20011-D`, `177`: a compiler's diagnostic number."""
    return _NUMBER.fullmatch(code.strip()) is not None


def number_of(code: str) -> int | None:
    """177 of `177-D`, `#177` and `177`; None for a name."""
    match = _NUMBER.fullmatch(code.strip())
    return int(match.group(1)) if match else None


def compiler_rule(d: Diagnostic) -> str:
    """The rule of a finding without a code: its compiler and severity (`nvrtc-error`,
    `nvcc-warning`, `host-compiler-error`, `ptxas-warning`)."""
    source = d.source.replace(" ", "-") or "compiler"
    return f"{source}-{d.severity.label}"


def rule_id(d: Diagnostic) -> str:
    """The rule a finding is reported under (SARIF's ruleId, GitHub's title): its code, else its
    compiler's rule for findings the compiler gives no number."""
    return d.code or compiler_rule(d)


def describe(rule: str, example: str = "") -> str:
    """One sentence that says what a rule means, never what one instance said. A compiler number
    is one message template of EDG's: the example's quoted names are replaced by `…`."""
    if rule in DESCRIPTIONS:
        return DESCRIPTIONS[rule]
    if is_number(rule):
        template = _ARCH_LIST.sub("", _QUOTED.sub('"…"', example.splitlines()[0] if example else ""))
        template = template.removeprefix("in included header ").strip()
        match = _NUMBER.fullmatch(rule.strip())
        number = match.group(1) if match else rule.strip()
        return f"Compiler diagnostic #{number}" + (f": {template}" if template else "")
    family = next((k for k in DESCRIPTIONS if k.endswith("-") and rule.startswith(k)), None)
    if family:
        return f"{DESCRIPTIONS[family]} ({rule.removeprefix(family).replace('-', ' ')})"
    source, _, severity = rule.rpartition("-")
    if severity in ("error", "warning", "info", "hint") and source:
        what = {"nvrtc": "NVRTC", "nvcc": "nvcc", "host-compiler": "The host compiler", "ptxas": "ptxas"}
        name = what.get(source, source)
        if severity == "error":
            return (
                f"{name} compile error. Compile errors have no number, so they share this rule; "
                "each result's message says which error it is"
            )
        return f"{name} {severity} without a number; each result's message says which one"
    return rule


def unknown_selectors(selectors: Iterable[str]) -> list[str]:
    """Selectors that can match no code (a typo): numbers and `ALL` always can; a name must be a
    prefix of a known code, or of a compiler's rule."""
    names = [*DESCRIPTIONS, "nvrtc-", "nvcc-", "host-compiler-", "ptxas-"]
    out = []
    for s in selectors:
        key = s.strip().lower()
        if key == "all" or is_number(key):
            continue
        if not any(n.startswith(key) or (key.startswith(n) and n.endswith("-")) for n in names):
            out.append(s)
    return out


def _specificity(selector: str, code: str) -> int | None:
    """How specifically `selector` matches `code` (longer is more specific), or None."""
    key = selector.strip()
    if key.upper() == "ALL":
        return 0
    number = _NUMBER.fullmatch(key)
    if number:
        mine = _NUMBER.fullmatch(code)
        return 1000 if mine and mine.group(1) == number.group(1) else None
    return len(key) if code.lower().startswith(key.lower()) else None


def _best(selectors: Iterable[str], code: str) -> int | None:
    found = [s for sel in selectors if (s := _specificity(sel, code)) is not None]
    return max(found) if found else None


def always_reported(d: Diagnostic) -> bool:
    """Findings a selection never hides: no code, a check that did not happen, a compile error."""
    if not d.code or d.code in CHECK_FAILURES:
        return True
    return d.severity == Severity.ERROR and d.source not in OWN_SOURCES


def selected(d: Diagnostic, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> bool:
    """Whether a selection keeps `d`. An empty `select` selects every code."""
    if always_reported(d):
        return True
    code = d.code or ""
    select = tuple(select)
    chosen = _best(select, code) if select else 0
    if chosen is None:
        return False
    dropped = _best(ignore, code)
    return dropped is None or dropped < chosen


def apply_selection(
    diagnostics: list[Diagnostic], select: Iterable[str] = (), ignore: Iterable[str] = ()
) -> list[Diagnostic]:
    select, ignore = tuple(select), tuple(ignore)
    if not select and not ignore:
        return diagnostics
    return [d for d in diagnostics if selected(d, select, ignore)]
