"""Getting a whole `.cu` out of an LLM's answer, whatever shape the answer takes.

Handled: fenced blocks (```cuda, ```cpp, ```c++, ```, ~~~), several blocks (the one that defines
the kernels wins; a block with only some kernels is spliced into the original file), an answer
that is bare code without fences, a missing or rewritten `// kernel-lsp: launch` line (kept from
the original when the answer has none), a launch line written in the prose outside the code, and
prose without any code (no candidate, with the reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel_lsp.compile.hostcode import find_host_code
from kernel_lsp.source import blank_comments, find_kernels, kernel_base_name, parse_directives

_FENCE = re.compile(
    r"(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+#.-]*)[^\n]*\n(?P<body>.*?)(?:\n(?P=fence)[ \t]*(?=\n|$)|\Z)",
    re.S,
)
_LAUNCH = re.compile(r"//\s*kernel-lsp:\s*launch\b[^\n]*")
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cc", "hpp", "h", "cuh"}


@dataclass(frozen=True)
class Extracted:
    source: str | None
    message: str = ""  # why nothing was extracted, or what was repaired


def code_blocks(answer: str) -> list[str]:
    """The fenced code blocks of a Markdown answer, in order (non-C languages skipped)."""
    out = []
    for m in _FENCE.finditer(answer):
        if m.group("lang").lower() in _CODE_LANGS:
            out.append(m.group("body"))
    return out


def _bare_code(answer: str) -> str | None:
    """Code written without fences: from the first line that looks like C/CUDA to the end of the
    last balanced brace."""
    lines = answer.splitlines(keepends=True)
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if re.match(
                r"\s*(#\s*(include|define|ifndef|pragma)|//|/\*|extern\s+\"C\"|__global__|template\s*<|__device__|struct\s|static\s|constexpr\s)",
                line,
            )
        ),
        None,
    )
    if start is None:
        return None
    text = "".join(lines[start:])
    last = text.rfind("}")
    return text[: last + 1] + "\n" if last >= 0 else None


def _definitions(source: str) -> dict[str, tuple[int, int]]:
    """{kernel: (start, end)} offsets of each __global__ definition, from its template/extern
    prefix line to its closing brace."""
    code = blank_comments(source)
    out = {}
    for k in find_kernels(source):
        # Offset of the kernel's name.
        line_start = sum(len(x) for x in source.splitlines(keepends=True)[: k.line - 1])
        name_at = line_start + k.col - 1
        glob = code.rfind("__global__", 0, name_at)
        if glob < 0:
            continue
        start = code.rfind("\n", 0, glob) + 1
        # Include `template <...>` / `extern "C"` on the line before.
        prev_start = code.rfind("\n", 0, max(0, start - 1)) + 1
        if re.match(r"\s*(template\s*<|extern\s+\"C\"\s*$)", code[prev_start:start]):
            start = prev_start
        brace = code.find("{", name_at)
        semi = code.find(";", name_at)
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration
        depth = 0
        for i in range(brace, len(code)):
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    out[k.name] = (start, i + 1)
                    break
    return out


def splice(original: str, partial: str, kernels: list[str]) -> str:
    """The original file with the kernels that `partial` defines replaced by its definitions;
    whatever else `partial` holds (helpers, macros) goes before the first replaced kernel."""
    new_defs = _definitions(partial)
    old_defs = _definitions(original)
    replaced = [k for k in kernels if k in new_defs and k in old_defs]
    if not replaced:
        return original
    rest = partial
    for k in sorted(replaced, key=lambda k: -new_defs[k][0]):
        s, e = new_defs[k]
        rest = rest[:s] + rest[e:]
    rest = _LAUNCH.sub("", rest).strip()
    out = original
    for k in sorted(replaced, key=lambda k: -old_defs[k][0]):
        s, e = old_defs[k]
        s2, e2 = new_defs[k]
        out = out[:s] + partial[s2:e2] + out[e:]
    if rest:
        first = min(old_defs[k][0] for k in replaced)
        out = out[:first] + rest + "\n\n" + out[first:]
    return out


def _launch_lines_from(answer_block: str, spliced: str) -> str:
    """The spliced file with its launch lines replaced by those of the answer, kernel by kernel
    and in order (the answer's kernels were written for its own grid and block)."""
    theirs = parse_directives(answer_block).launches
    lines = spliced.splitlines(keepends=True)
    used: dict[str, int] = {}
    for d in parse_directives(spliced).launches:
        mine = [t for t in theirs if t.kernel == d.kernel]
        i = used.get(d.kernel, 0)
        if i < len(mine):
            used[d.kernel] = i + 1
            ending = "\n" if lines[d.line - 1].endswith("\n") else ""
            lines[d.line - 1] = answer_block.splitlines()[mine[i].line - 1].strip() + ending
    return "".join(lines)


def _ensure_launch_lines(candidate: str, original: str, kernels: list[str], answer: str) -> tuple[str, str]:
    """Every launched kernel needs its launch line: keep the candidate's, else take one from the
    prose of the answer, else the original's. Returns (source, what was repaired)."""
    have = {d.kernel for d in parse_directives(candidate).launches}
    missing = [k for k in kernels if k not in have]
    if not missing:
        return candidate, ""
    prose = {d.kernel: d for d in parse_directives("\n".join(_LAUNCH.findall(answer))).launches}
    orig_lines = original.splitlines()
    added, notes = [], []
    for k in missing:
        if k in prose:
            d = prose[k]
            added.append(
                f"// kernel-lsp: launch {k} grid={d.grid} block={d.block}"
                + (f" smem={d.smem}" if d.smem != "0" else "")
            )
            notes.append(f"launch line of `{k}` taken from the answer's text")
        else:
            for d in parse_directives(original).launches_of(k):
                added.append(orig_lines[d.line - 1].strip())
            notes.append(f"launch line of `{k}` kept from the original")
    # Tune lines describe the original's macros; keep them only if the candidate has none.
    if not parse_directives(candidate).tunables:
        for t in parse_directives(original).tunables:
            added.append(orig_lines[t.line - 1].strip())
    return "\n".join(added) + "\n" + candidate, "; ".join(notes)


def extract_candidate(answer: str, original: str, kernels: list[str]) -> Extracted:
    """The candidate `.cu` an answer proposes for `kernels` (all launched kernels of the spec)."""
    if not answer or not answer.strip():
        return Extracted(None, "empty answer")
    # A spec may name a template instance (`scale<float>`): the source defines `scale`.
    kernels = list(dict.fromkeys(kernel_base_name(k) for k in kernels))
    blocks = code_blocks(answer)
    if not blocks:
        bare = _bare_code(answer)
        blocks = [bare] if bare else []
    with_kernels = [b for b in blocks if any(k.name in kernels for k in find_kernels(b))]
    if not with_kernels:
        if blocks:
            return Extracted(None, f"the answer's code defines none of the kernels {', '.join(kernels)}")
        return Extracted(None, "the answer holds no code")

    # The block that defines the most of the kernels; the last such (a final, corrected version).
    def score(b: str) -> int:
        return len({k.name for k in find_kernels(b)} & set(kernels))

    best = max(reversed(with_kernels), key=score)
    notes = []
    defined = {k.name for k in find_kernels(best)}
    # A whole file has its launch line or preprocessor lines; kernels alone (or only some of
    # them) replace their definitions in the original, keeping its macros and helpers.
    whole_file = bool(_LAUNCH.search(best) or re.search(r"^\s*#\s*\w+", best, re.M))
    # A file with host code (main, <<<>>> launches) keeps it: an answer that dropped it (device
    # code only) has its kernels spliced into the original, host code and all.
    drops_host = not {u.what for u in find_host_code(original)} <= {u.what for u in find_host_code(best)}
    if not set(kernels) <= defined or not whole_file or drops_host:
        answer_block = best
        best = splice(original, best, kernels)
        if drops_host:
            best = _launch_lines_from(answer_block, best)
        notes.append(
            "the answer's kernels were spliced into the original file"
            + (" (keeping its host code)" if drops_host else "")
        )
    source, repaired = _ensure_launch_lines(best, original, kernels, answer)
    if repaired:
        notes.append(repaired)
    if not source.endswith("\n"):
        source += "\n"
    return Extracted(source, "; ".join(notes))
