"""Finds host code that NVRTC cannot compile, so a file with `main` or `cudaMalloc` gets one clear
diagnostic instead of a wall of errors. Code guarded by `#ifndef __CUDACC_RTC__` is ignored."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .advice import DEFAULT_DEVICE
from .constants import scope_opened, without_preprocessor
from .lexer import blank, blank_comments_keep_strings, matching

HOST_HEADERS = frozenset(
    [
        "vector",
        "iostream",
        "string",
        "map",
        "unordered_map",
        "set",
        "unordered_set",
        "fstream",
        "sstream",
        "thread",
        "mutex",
        "memory",
        "algorithm",
        "iomanip",
        "cstdio",
        "stdio.h",
        "cstdlib",
        "stdlib.h",
        "cstring",
        "string.h",
        "ctime",
        "time.h",
        "random",
        "queue",
        "deque",
        "list",
        "stack",
        "functional",
        "chrono",
        "numeric",
        "iterator",
        "cassert",
        "assert.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cuda.h",
        "cuda_profiler_api.h",
        "nvrtc.h",
        # The host APIs of NVIDIA's libraries (their device APIs, curand_kernel.h, are not here).
        "cublas.h",
        "cublas_v2.h",
        "cublas_api.h",
        "cublasLt.h",
        "cublasXt.h",
        "cufft.h",
        "cufftXt.h",
        "cufftw.h",
        "curand.h",
        "cusparse.h",
        "cusparse_v2.h",
        "cusolverDn.h",
        "cusolverSp.h",
        "cudnn.h",
        "nccl.h",
    ]
)

# Host-only libraries named by folder: PyTorch extensions, pybind11.
HOST_HEADER_FOLDERS = ("torch/", "ATen/", "c10/", "pybind11/")

_MARKERS = [
    (re.compile(r"\bint\s+main\s*\("), "`main`"),
    (
        re.compile(
            r"\bcuda(Malloc\w*|Memcpy\w*|Memset\w*|Free\w*|DeviceSynchronize|StreamCreate\w*|"
            r"EventCreate\w*|GetLastError|SetDevice|LaunchKernel)\s*\("
        ),
        None,
    ),
    (re.compile(r"<<<"), "a `<<<...>>>` launch"),
    (re.compile(r"\bstd::(vector|cout|cerr|string|map|thread)\b"), None),
]
# Text every marker holds.
_MARKER_WORDS = re.compile(r"main|cuda|<<<|std::")
_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>")
_RTC = r"__CUDACC_RTC__"


@dataclass(frozen=True)
class HostCodeUse:
    line: int
    col: int
    what: str


def find_host_code(source: str, compiler: str = "nvrtc", includes: bool = True) -> list[HostCodeUse]:
    """The host code `compiler` sees: NVRTC skips what `#ifndef __CUDACC_RTC__` guards, nvcc
    what `#ifdef __CUDACC_RTC__` guards. `includes` False: host code the file runs (`main`, a
    launch, CUDA runtime calls, host containers), not the host headers it includes (candle's
    device-only kernels include <cuda.h>)."""
    code = blank_comments_keep_strings(source)
    found: list[HostCodeUse] = []
    # One entry per open #if: "host" (NVRTC skips it), "rtc" (only NVRTC sees it) or "other".
    stack: list[str] = []
    unseen = "host" if compiler == "nvrtc" else "rtc"
    for lineno, text in enumerate(code.splitlines(), start=1):
        d = re.sub(r"^\s*#\s*", "#", text) if "#" in text else text
        if d.startswith("#"):
            d = d[1:]
            if re.match(rf"ifndef\s+{_RTC}\b|if\s+!\s*defined\s*\(?\s*{_RTC}", d):
                stack.append("host")
            elif re.match(rf"ifdef\s+{_RTC}\b|if\s+defined\s*\(?\s*{_RTC}", d):
                stack.append("rtc")
            elif d.startswith("if"):
                stack.append("other")
            elif (d.startswith("else") or d.startswith("elif")) and stack:
                stack[-1] = {"host": "rtc", "rtc": "host"}.get(stack[-1], stack[-1])
            elif d.startswith("endif") and stack:
                stack.pop()
            if not d.startswith("include"):
                continue
        if unseen in stack:
            continue
        m = _INCLUDE.match(text) if includes else None
        if m and (m.group(1).strip() in HOST_HEADERS or m.group(1).strip().startswith(HOST_HEADER_FOLDERS)):
            found.append(HostCodeUse(lineno, m.start(1), f"`#include <{m.group(1).strip()}>`"))
            continue
        if not _MARKER_WORDS.search(text):  # most lines: one scan instead of one per marker
            continue
        for pattern, what in _MARKERS:
            for hit in pattern.finditer(text):
                found.append(HostCodeUse(lineno, hit.start() + 1, what or f"`{hit.group(0).rstrip('( ')}`"))
    return found


def host_code_message(uses: list[HostCodeUse], advice: str = "") -> str:
    shown = ", ".join(f"{u.what} (line {u.line})" for u in uses[:4])
    more = f" and {len(uses) - 4} more" if len(uses) > 4 else ""
    return (
        f"NVRTC compiles device code only, and this file has host code: {shown}{more}. "
        + (advice + " Or guard" if advice else "Guard")
        + " the host code with `#ifndef __CUDACC_RTC__` ... `#endif`, or, if unannotated "
        f"functions are meant for the device, {DEFAULT_DEVICE} (NVRTC's -default-device)."
    )


# NVRTC's JIT mode refuses, at namespace or class scope, a function declared without an execution
# space (`inline int round_up(int n)`, a struct's member, a constructor with a body, an operator)
# and a namespace-scope variable without a memory space (`int counter;`); nvcc's device pass
# compiles both for the host and says nothing. `= default` and `= delete` members, `const` and
# `constexpr` variables NVRTC takes (tests/integration/test_nvcc_truth.py asks NVRTC itself).
_EXECUTION_SPACES = re.compile(r"\b(?:__device__|__global__|__host__)\b")
_SPACE_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+[^\n]*\b(?:__device__|__global__|__host__)\b", re.M
)
_MEMORY_SPACES = re.compile(r"\b(?:__device__|__constant__|__shared__|__managed__|const|constexpr)\b")
_NOT_A_DECLARATION = re.compile(
    r"^\s*(?:typedef|using|static_assert|friend|return|namespace|template\s*<[^;]*>\s*(?:struct|class|union)"
    r"|struct|class|union|enum|extern\s*$)\b"
)
_CALLED = re.compile(r"(?:\b(?:operator\s*(?:\(\s*\)|[^\s(\w]+|\w+)|~?[A-Za-z_]\w*))\s*\($")
_STATEMENT_END = re.compile(r"[;{}]")


def find_unannotated(source: str) -> HostCodeUse | None:
    """The first function or namespace-scope variable NVRTC's JIT mode refuses for want of an
    execution or memory space, or None. A macro whose body names an execution space
    (`#define HD __host__ __device__`) counts as one. Misses cost only time (NVRTC's error sends
    the file to nvcc); so does a false find (nvcc decides)."""
    macros = set(_SPACE_MACRO.findall(source))
    annotated = (
        re.compile(rf"{_EXECUTION_SPACES.pattern}|\b(?:{'|'.join(map(re.escape, macros))})\b")
        if macros
        else _EXECUTION_SPACES
    )
    code = without_preprocessor(blank(source))

    def declared(statement: str, at: int, scope: str) -> HostCodeUse | None:
        """What `statement` (ending at offset `at`, before its `;` or body) declares unannotated."""
        if _NOT_A_DECLARATION.match(statement) or not statement.strip():
            return None
        head = re.sub(r"^\s*template\s*<", "<", statement)
        if head.startswith("<"):  # a template's parameters: the declaration follows them
            close = matching(head, 0)
            head = head[close + 1 :] if close > 0 else head
        paren = head.find("(")
        name = _CALLED.search(head[: paren + 1]) if paren > 0 and "=" not in head[:paren] else None
        if name is not None:
            if annotated.search(head) or re.search(r"=\s*(?:default|delete)\s*$", head):
                return None
            if scope == "namespace" and not head[: name.start()].strip():
                return None  # `NAME(args);` with no type before it: a macro's use
            line = code.count("\n", 0, at - len(head) + name.start()) + 1
            return HostCodeUse(
                line, 0, f"`{name.group(0)[:-1].strip()}` declared without `__device__` or `__host__`"
            )
        if scope != "namespace" or annotated.search(head) or _MEMORY_SPACES.search(head):
            return None
        words = re.findall(r"[A-Za-z_]\w*", head.split("=", 1)[0])
        if len(words) < 2:  # a variable has a type and a name
            return None
        line = code.count("\n", 0, at - len(head.lstrip())) + 1
        return HostCodeUse(line, 0, f"namespace-scope variable `{words[-1]}` without `__device__`")

    def scan(start: int, end: int, scope: str) -> HostCodeUse | None:
        statement = start
        while (hit := _STATEMENT_END.search(code, start, end)) is not None:
            i = hit.start()
            c = code[i]
            if c == ";":
                if found := declared(code[statement:i], i, scope):
                    return found
                statement = i + 1
            elif c == "{":
                close = matching(code, i, end)
                if close < 0:
                    return None
                head = code[statement:i]
                if inner := scope_opened(code, statement, i):
                    if found := scan(i + 1, close, inner):
                        return found
                    # `struct S {...} s;` goes on to its `;`; a namespace's block ends its statement
                    if inner == "namespace":
                        statement = close + 1
                elif "(" in head and "=" not in head.split("(", 1)[0]:
                    if found := declared(head, i, scope):  # a function's body follows its declarator
                        return found
                    statement = close + 1
                i = close
            elif c == "}":
                statement = i + 1
            start = i + 1
        return None

    return scan(0, len(code), "namespace")
