"""Finds host code that NVRTC cannot compile, so a file with `main` or `cudaMalloc` gets one clear
diagnostic instead of a wall of errors. Code guarded by `#ifndef __CUDACC_RTC__` is ignored."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..advice import DEFAULT_DEVICE
from ..lexer import blank_comments_keep_strings

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
