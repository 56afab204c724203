"""The top level of a `.cu` text as items (preprocessor lines, kernels, device functions, host
functions, other declarations), for putting an answer's code into a file without moving code
above what it calls; and the includes a text needs for the names it uses.

Text only, never raises: comments and strings are blanked before braces are counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel_lsp.lexer import COMMENTS, blank_comments, lex, matching, matching_back
from kernel_lsp.source import find_includes

# Kinds of items: "pp" (a preprocessor line), "kernel" (__global__), "device" (a function device
# code can call: __device__, __host__ __device__), "host" (a host function), "other" (types,
# constants, `__constant__`/`__device__` variables, using/typedef, templates of types) and
# "block" (an `extern "C" {` or `namespace` block taken as one).


@dataclass(frozen=True)
class Item:
    kind: str
    name: str  # the function's, type's or macro's name; the target of an include
    start: int  # offsets in the text: [start, end), whole lines
    end: int

    def text(self, source: str) -> str:
        return source[self.start : self.end]


_PP = re.compile(r"[ \t]*#[ \t]*(\w+)[ \t]*(.*)")
_FUNCTION_NAME = re.compile(r"(~?[A-Za-z_]\w*)\s*\($")


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end + 1


def _function_name(header: str) -> str:
    """The name before the parameter list of a function header (`__launch_bounds__(...)` and
    template arguments skipped); "" when the header is not a function's."""
    head = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", header)
    close = head.rfind(")")
    open_ = matching_back(head, close) if close >= 0 else -1
    if open_ < 0:
        return ""
    m = _FUNCTION_NAME.search(head[: open_ + 1])
    return m.group(1) if m else ""


def _classify(header: str, body: str) -> tuple[str, str]:
    """(kind, name) of an item from its header (the text before its first `{` or `;`)."""
    h = " ".join(header.split())
    if body and (h == "extern" or h.startswith("namespace")):
        return "block", ""
    m = re.match(
        r"(?:template\s*<.*>\s*)?(?:struct|class|union|enum(?:\s+class)?)\s+"
        r"(?:(?:alignas|__align__|__attribute__)\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*)*"
        r"([A-Za-z_]\w*)?",
        h,
    )
    if m:
        return "other", m.group(1) or ""
    name = _function_name(h) if "(" in h and "=" not in h.split("(")[0] else ""
    if name and body:
        if "__global__" in h:
            return "kernel", name
        if "__device__" in h:
            return "device", name
        return "host", name
    if name:  # a declaration
        return "other", name
    words = re.findall(r"[A-Za-z_]\w*", h.split("=")[0].split("[")[0])
    return "other", words[-1] if words else ""


def top_items(source: str) -> list[Item]:
    """The file's top-level items, in order. Comments between items belong to the item after them."""
    code = blank_comments(source)
    items: list[Item] = []
    i, n = 0, len(code)
    pending = 0  # where the current item's text (its leading comments) starts
    while i < n:
        if code[i] in " \t\r\n;":
            i += 1
            continue
        line_start = code.rfind("\n", 0, i) + 1
        if code[i] == "#" and not code[line_start:i].strip():
            end = i
            while True:  # a macro continued with backslashes
                end = _line_end(code, end)
                if end >= n or not code[:end].rstrip("\r\n").endswith("\\"):
                    break
            m = _PP.match(code[line_start:end])
            directive, rest = (m.group(1), m.group(2)) if m else ("", "")
            if directive == "include":
                name = source[line_start:end].split("include", 1)[1].strip().strip('<>"')
            else:
                name = (re.findall(r"[A-Za-z_]\w*", rest) or [""])[0]
            items.append(Item("pp", name, min(pending, line_start), end))
            pending = i = end
            continue
        # A declaration or definition: up to its `;` at depth 0, or its body's closing brace.
        j, depth, body = i, 0, False
        while j < n:
            c = code[j]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif c == "{":
                if depth == 0:
                    body = True
                    close = matching(code, j)
                    j = close if close >= 0 else n - 1
                    # `struct S {...} s;` and `int t[2] = {1, 2};` end at the `;` after the brace.
                    k = j + 1
                    while k < n and code[k] in " \t":
                        k += 1
                    header = code[i : code.find("{", i)]
                    if k < n and (
                        code[k] == ";" or "=" in header or re.search(r"\b(struct|class|union|enum)\b", header)
                    ):
                        semi = code.find(";", k)
                        j = semi if semi >= 0 else j
                    break
                depth += 1
            elif c == ";" and depth == 0:
                break
            j += 1
        end = _line_end(code, min(j, n - 1))
        header = code[i : j + 1].split("{", 1)[0].split(";", 1)[0]
        kind, name = _classify(header, code[i : j + 1] if body else "")
        items.append(Item(kind, name, min(pending, line_start), end))
        pending = i = end
    return items


def host_functions(source: str) -> list[str]:
    """Names of the host functions the file defines at top level (`extern "C" {` blocks included)."""
    names = [it.name for it in top_items(source) if it.kind == "host"]
    for it in top_items(source):
        if it.kind == "block":
            inner = it.text(source)
            brace = blank_comments(inner).find("{")
            if brace >= 0:
                names += [x.name for x in top_items(inner[brace + 1 : inner.rfind("}")]) if x.kind == "host"]
    return names


# --- includes a text needs --------------------------------------------------------------------

# A header, and the names whose use needs it. Only headers the fence allows (CUDA's and the C/C++
# standard ones); `cuda_runtime.h` is never needed: nvcc includes it in every `.cu`.
NEEDS: dict[str, re.Pattern[str]] = {
    "cuda_bf16.h": re.compile(
        r"\b(__nv_bfloat162?|nv_bfloat162?|__float2bfloat16\w*|__bfloat162float|__bfloat1622float2|"
        r"__floats2bfloat162_rn|__float22bfloat162_rn)\b"
    ),
    "cuda_fp16.h": re.compile(
        r"\b(__half2?|half2|__float2half\w*|__half2float|__half22float2|__floats2half2_rn)\b"
    ),
    "cooperative_groups.h": re.compile(r"\bcooperative_groups\b"),
    "vector": re.compile(r"\bstd::vector\b"),
    "algorithm": re.compile(r"\bstd::(sort|fill|copy|min_element|max_element|transform)\b"),
    "cstdio": re.compile(r"(?<![\w.>])(printf|fprintf|snprintf|puts|fputs)\s*\("),
    "cstdint": re.compile(r"\b(u?int(8|16|32|64)_t)\b"),
    "cfloat": re.compile(r"\bFLT_(MAX|MIN|EPSILON)\b"),
    "climits": re.compile(r"\b(INT|UINT|LONG)_(MAX|MIN)\b"),
}
# The same header under its C name.
_SAME = {"stdio.h": "cstdio", "stdint.h": "cstdint", "float.h": "cfloat", "limits.h": "climits"}
# Headers that bring another in: no need to add what they include.
_BRINGS = {"cuda_bf16.h": {"cuda_fp16.h"}}


def needed_includes(source: str) -> list[str]:
    """Headers of NEEDS the text uses names of and does not include (in NEEDS' order)."""
    have = {_SAME.get(i.target, i.target) for i in find_includes(source)}
    for h in list(have):
        have |= _BRINGS.get(h, set())
    code = blank_comments(source)
    return [h for h, pattern in NEEDS.items() if h not in have and pattern.search(code)]


def add_includes(source: str, headers: list[str]) -> str:
    """`source` with `#include <h>` for each header, on the line after its leading comments."""
    if not headers:
        return source
    end = 0
    for tok in lex(source).tokens:
        if tok.kind not in COMMENTS or source[end : tok.start].strip():
            break
        end = tok.end
    newline = source.find("\n", end)
    at = 0 if end == 0 else len(source) if newline < 0 else newline + 1
    block = "".join(f"#include <{h}>\n" for h in headers)
    if at and not source[:at].endswith("\n"):
        block = "\n" + block  # a file of comments only, without a last newline
    return source[:at] + block + source[at:]
