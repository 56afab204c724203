"""Getting a whole `.cu` out of an LLM's answer, whatever shape the answer takes.

Handled: fenced blocks (```cuda, ```cpp, ```c++, ```, ~~~), several blocks (the one that defines
the kernels wins; a block with only some kernels is spliced into the original file), an answer
that is bare code without fences, a missing or rewritten `// kernel-lsp: launch` line (kept from
the original when the answer has none), a launch line written in the prose outside the code, and
prose without any code (no candidate, with the reason).

For an entry spec (a host launcher): an answer that is a complete file (it defines the entry, or
has its own `extern "C"` launcher) IS the new file, never spliced: renamed, added or removed
kernels and a new launcher stay together, in the answer's order. An answer with kernels only has
them spliced into the original, which keeps its launcher. Either way, headers the code uses and
does not include (`<cuda_bf16.h>` for `__nv_bfloat16`) are added, and `Extracted.message` says
what extraction changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel_lsp.host_entry import find_host_function
from kernel_lsp.hostcode import find_host_code
from kernel_lsp.lexer import blank_comments, matching
from kernel_lsp.source import find_includes, find_kernels, kernel_base_name, parse_directives

from .file_items import add_includes, host_functions, needed_includes, top_items

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
        close = matching(code, brace)
        if close >= 0:
            out[k.name] = (start, close + 1)
    return out


def splice(original: str, partial: str, kernels: list[str]) -> tuple[str, list[str]]:
    """The original file with the kernels that `partial` defines replaced by its definitions, and
    what was done besides, in words. Device-side code of `partial` (macros, types, device
    functions, constants) that the original lacks goes before the first replaced kernel; where
    the original has an item of that name and kind, the answer's replaces it in place. The
    answer's host functions are left out: the original's host code stays as it is, and nothing
    is moved above code that calls it."""
    new_defs = _definitions(partial)
    old_defs = _definitions(original)
    replaced = [k for k in kernels if k in new_defs and k in old_defs]
    if not replaced:
        return original, []
    notes: list[str] = []
    kept_original = {(it.kind, it.name) for it in top_items(original)}
    original_includes = {i.target for i in find_includes(original)}
    insert: list[str] = []
    in_place: dict[tuple[str, str], str] = {}
    left_out: list[str] = []
    for it in top_items(partial):
        text = it.text(partial)
        if it.kind == "kernel" and it.name in replaced:
            continue
        if it.kind in ("host", "block"):
            if it.name or it.kind == "block":
                left_out.append(it.name or "an extern/namespace block")
            continue
        if it.kind == "pp":
            text = _LAUNCH.sub("", text)
            if not text.strip() or (it.name in original_includes and "include" in text):
                continue
        elif it.name and (it.kind, it.name) in kept_original and it.kind in ("device", "other"):
            in_place[(it.kind, it.name)] = text
            continue
        insert.append(text)
    out = original
    # Replacements from the end, so earlier offsets stay valid: kernels, then same-named items.
    edits: list[tuple[int, int, str]] = []
    for k in replaced:
        s, e = old_defs[k]
        s2, e2 = new_defs[k]
        edits.append((s, e, partial[s2:e2]))
    for it in top_items(original):
        key = (it.kind, it.name)
        if key in in_place:
            edits.append((it.start, it.end, in_place.pop(key)))
    for s, e, text in sorted(edits, key=lambda x: -x[0]):
        out = out[:s] + text + out[e:]
    rest = "".join(insert).strip()
    if rest:
        # Before the first replaced kernel and the comment lines above it.
        first = min(old_defs[k][0] for k in replaced)
        holder = next((it for it in top_items(original) if it.start <= first < it.end), None)
        if holder is not None:
            first = (
                holder.start
                + len(original[holder.start : first])
                - len(original[holder.start : first].lstrip("\n"))
            )
        shift = sum(len(t) - (e - s) for s, e, t in edits if e <= first)
        at = first + shift
        out = out[:at] + rest + "\n\n" + out[at:]
    if left_out:
        names = ", ".join(f"`{n}`" for n in dict.fromkeys(left_out))
        notes.append(f"the answer's host code ({names}) was left out: the original's is kept")
    return out, notes


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


def _defines_function(block: str, name: str) -> bool:
    found = find_host_function(block, name)
    return found is not None and found.definition


def is_complete_file(block: str, entry: str) -> bool:
    """Whether an answer's block is a whole file for an entry spec: it defines the entry (its own
    launcher), or it has host launches and an `extern "C"` host function (a launcher under
    another name: taken as the file, so the gates can say the entry is missing)."""
    if _defines_function(block, entry):
        return True
    code = blank_comments(block)
    launches = re.search(r"<<<|\bcudaLaunch(Cooperative)?Kernel(Ex)?\s*\(", code)
    return bool(launches) and bool(host_functions(block)) and 'extern "C"' in block


def _without_harness(block: str, original: str) -> tuple[str, list[str]]:
    """An entry's candidate without the `main` a model added to test it (the entry is what runs;
    a `main` the original has stays)."""
    if "main" in host_functions(original):
        return block, []
    mains = [it for it in top_items(block) if it.kind == "host" and it.name == "main"]
    for it in reversed(mains):
        block = block[: it.start] + block[it.end :]
    return block, ["dropped the answer's `main` (a test harness: the entry is what runs)"] if mains else []


def _whole_file(block: str) -> tuple[str, list[str]]:
    """An answer's file as it is, with the headers it uses and does not include added."""
    missing = needed_includes(block)
    source = add_includes(block, missing)
    notes = [f"added `#include <{h}>`, which the answer's code uses and does not include" for h in missing]
    return source, notes


def _finish(source: str, notes: list[str]) -> Extracted:
    if not source.endswith("\n"):
        source += "\n"
    return Extracted(source, "; ".join(n for n in notes if n))


def _extract_for_entry(blocks: list[str], original: str, entry: str) -> Extracted:
    """An entry spec's candidate: a complete file (kernels and launcher) is the new file; kernels
    alone replace theirs in the original, which keeps its launcher."""
    complete = [b for b in blocks if is_complete_file(b, entry)]
    if complete:
        own = [b for b in complete if _defines_function(b, entry)]
        chosen, dropped = _without_harness((own or complete)[-1], original)
        source, notes = _whole_file(chosen)  # the last: a final, corrected version
        return _finish(source, dropped + notes)
    original_kernels = [k.name for k in find_kernels(original)]
    with_kernels = [b for b in blocks if {k.name for k in find_kernels(b)} & set(original_kernels)]
    if not with_kernels:
        others = sorted({k.name for b in blocks for k in find_kernels(b)})
        if others:
            return Extracted(
                None,
                f"the answer defines kernels ({', '.join(others)}) but not the entry `{entry}` that "
                "launches them: a complete file needs its launcher",
            )
        if blocks:
            return Extracted(None, f"the answer's code defines neither the entry `{entry}` nor its kernels")
        return Extracted(None, "the answer holds no code")
    best = max(
        reversed(with_kernels), key=lambda b: len({k.name for k in find_kernels(b)} & set(original_kernels))
    )
    source, notes = splice(original, best, original_kernels)
    kept = sorted({k.name for k in find_kernels(best)} & set(original_kernels))
    notes.insert(
        0,
        f"the answer has kernels only ({', '.join(kept)}): spliced into the original file, which keeps "
        f"its launcher `{entry}`",
    )
    unused = sorted({k.name for k in find_kernels(best)} - set(original_kernels))
    if unused:
        notes.append(
            f"kernel(s) {', '.join(unused)} of the answer are not launched by the original's launcher"
        )
    missing = needed_includes(source)
    if missing:
        source = add_includes(source, missing)
        notes += [f"added `#include <{h}>`, which the answer's code uses" for h in missing]
    return _finish(source, notes)


def extract_candidate(answer: str, original: str, kernels: list[str], entry: str | None = None) -> Extracted:
    """The candidate `.cu` an answer proposes for `kernels` (all launched kernels of the spec), or
    for the host function `entry` of an entry spec. `message` says what extraction changed."""
    if not answer or not answer.strip():
        return Extracted(None, "empty answer")
    blocks = code_blocks(answer)
    if not blocks:
        bare = _bare_code(answer)
        blocks = [bare] if bare else []
    if entry:
        return _extract_for_entry(blocks, original, entry)
    # A spec may name a template instance (`scale<float>`): the source defines `scale`.
    kernels = list(dict.fromkeys(kernel_base_name(k) for k in kernels))
    with_kernels = [b for b in blocks if any(k.name in kernels for k in find_kernels(b))]
    if not with_kernels:
        if blocks:
            return Extracted(None, f"the answer's code defines none of the kernels {', '.join(kernels)}")
        return Extracted(None, "the answer holds no code")

    # The block that defines the most of the kernels; the last such (a final, corrected version).
    def score(b: str) -> int:
        return len({k.name for k in find_kernels(b)} & set(kernels))

    best = max(reversed(with_kernels), key=score)
    notes: list[str] = []
    defined = {k.name for k in find_kernels(best)}
    # A whole file has its launch line or preprocessor lines; kernels alone (or only some of
    # them) replace their definitions in the original, keeping its macros and helpers.
    whole_file = bool(_LAUNCH.search(best) or re.search(r"^\s*#\s*\w+", best, re.M))
    # A file with host code (main, a launcher) keeps it: an answer without the original's host
    # functions has its kernels spliced into the original, host code and all. Host functions
    # decide, not includes: an answer that dropped an include it does not need is still whole.
    has_host = bool(find_host_code(original))
    drops_host = has_host and (
        not set(host_functions(original)) <= set(host_functions(best)) or not find_host_code(best)
    )
    if not set(kernels) <= defined or not whole_file or drops_host:
        answer_block = best
        best, splice_notes = splice(original, best, kernels)
        if drops_host:
            best = _launch_lines_from(answer_block, best)
        notes.append(
            "the answer's kernels were spliced into the original file"
            + (" (keeping its host code)" if drops_host else "")
        )
        notes += splice_notes
    else:
        best, include_notes = _whole_file(best)
        notes += include_notes
    source, repaired = _ensure_launch_lines(best, original, kernels, answer)
    if repaired:
        notes.append(repaired)
    return _finish(source, notes)
