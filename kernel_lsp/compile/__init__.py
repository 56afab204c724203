"""The compile stage: CUDA source → a compiler backend → one compiled artifact (`CompileResult`:
findings, per-kernel resources, CUBIN, the headers read). Never raises on user input.

Backends: `nvrtc` (device-only files, in process) and `nvcc` (files with host code, options NVRTC
cannot take; a subprocess). The flag sources, the log parser and the artifact builder are shared
by every backend.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import replace

from .. import procs
from ..model import FAULT_CODES, CompileResult, Diagnostic, Severity, ran_out_of_memory
from .files import MAX_FILE_BYTES, decode_source, read_source
from .hostcode import find_host_code
from .includes import blocked_includes, header_stamps, include_closure, resolve_include
from .nvcc import FRONT_END, FULL, SKIPPED, compile_nvcc
from .nvrtc import ask_nvrtc_in_child, check_arch, compile_nvrtc, known_diagnostic_number, supported_archs
from .options import (
    FALLBACK_ARCH,
    CompileOptions,
    cuda_include_dirs,
    local_gpu_arch,
    resolve_arch,
    usable_macros,
)
from .pool import COMPILE_MEMORY_MB, JOB_TIMEOUT_S, WorkerFailed, compile_pool, end_pool, run_isolated
from .toolchain import find_toolchain
from .versions import nvrtc_version

__all__ = [
    "COMPILE_MEMORY_MB",
    "FALLBACK_ARCH",
    "FRONT_END",
    "FULL",
    "JOB_TIMEOUT_S",
    "MAX_FILE_BYTES",
    "SKIPPED",
    "CompileOptions",
    "CompileResult",
    "ask_nvrtc_in_child",
    "check_arch",
    "choose_backend",
    "compile_file",
    "compile_front_end",
    "compile_isolated",
    "compile_pool",
    "compile_source",
    "cuda_include_dirs",
    "decode_source",
    "end_pool",
    "find_toolchain",
    "header_stamps",
    "include_closure",
    "known_diagnostic_number",
    "local_gpu_arch",
    "nvrtc_version",
    "read_source",
    "resolve_arch",
    "resolve_include",
    "supported_archs",
]


@functools.lru_cache(maxsize=64)
def _has_host_code(source: str) -> bool:
    """Memoised: an unchanged re-save asks again, and the cache hit should cost ~nothing."""
    return bool(find_host_code(source))


def choose_backend(source: str, options: CompileOptions) -> str:
    """ "nvrtc" or "nvcc". With `compiler = auto`: nvcc for text with host code and for options
    NVRTC 13 rejects, when nvcc and a host compiler are there; NVRTC otherwise (its host-code
    diagnostic then says what to install)."""
    if options.compiler in ("nvrtc", "nvcc"):
        return options.compiler
    needs_nvcc = options.relaxed_constexpr or options.extended_lambda
    if not needs_nvcc and not options.default_device:
        needs_nvcc = _has_host_code(source)
    if needs_nvcc and find_toolchain(options.extra).problem is None:
        return "nvcc"
    return "nvrtc"


def compile_source(source: str, path: str, options: CompileOptions, use_cache: bool = True) -> CompileResult:
    """Compile one file for one arch with the backend its options and text call for. A define
    that cannot be passed as written is left out, with an error at the top of the file. Headers no
    compiler must be handed (a FIFO, a device, a huge file) are errors at their #include. With
    `compiler = auto`, device-only text that NVRTC fails on because a header it includes has host
    code (a header of a host+device project) goes to nvcc, as the project builds it."""
    if blocked := blocked_includes(source, path, options):
        return CompileResult(path, options.arch, False, blocked)
    options, refused = usable_macros(options)
    if choose_backend(source, options) == "nvcc":
        result = compile_nvcc(source, path, options, use_cache)
    else:
        result = compile_nvrtc(source, path, options, use_cache)
        if (
            not result.ok
            and options.compiler == "auto"
            and any(_has_host_code_on_disk(h) for h in result.includes)
            and find_toolchain(options.extra).problem is None
        ):
            result = compile_nvcc(source, path, options, use_cache)
    return _with_refused(_memory_verdict(result), path, refused)


def _with_refused(result: CompileResult, path: str, refused: list[str]) -> CompileResult:
    if not refused:
        return result
    found = [
        Diagnostic(path, 1, 1, Severity.ERROR, f"{p}; left out", code="define", source="kernel-lsp")
        for p in refused
    ]
    return replace(result, diagnostics=found + result.diagnostics)  # a copy: the caches hold `result`


def _has_host_code_on_disk(header: str) -> bool:
    try:
        st = os.stat(header)
    except OSError:
        return False
    return _file_has_host_code(header, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=1024)
def _file_has_host_code(path: str, mtime_ns: int, size: int) -> bool:
    """Memoised by the file's stamp: a header is read again only when it changes."""
    source, _ = read_source(path)
    return source is not None and bool(find_host_code(source))


def compile_front_end(source: str, path: str, options: CompileOptions) -> CompileResult | None:
    """A first look at a file nvcc compiles: its front end's findings, no resources (a full
    result already cached comes back whole). None for a file NVRTC compiles (it is quick)."""
    if blocked_includes(source, path, options):
        return None  # the full check says so at once
    options, refused = usable_macros(options)
    if choose_backend(source, options) != "nvcc":
        return None
    result = compile_nvcc(source, path, options, stage=FRONT_END)
    return _with_refused(_memory_verdict(result), path, refused)


# What the compilers say when an allocation fails (the memory limit, or the machine's memory):
# EDG's "catastrophic error: out of memory", LLVM's "LLVM ERROR: out of memory", g++'s "virtual
# memory exhausted".
_OUT_OF_MEMORY = re.compile(r"out of memory|virtual memory exhausted|std::bad_alloc", re.IGNORECASE)


def _memory_verdict(result: CompileResult) -> CompileResult:
    """A compile that ran out of memory says nothing about the code there: its "out of memory"
    error becomes the one information that says so (findings before it stay)."""
    if result.ok or not (said := _OUT_OF_MEMORY.search(result.log)):
        return result
    line = next((ln.strip() for ln in result.log.splitlines() if said.group(0) in ln), said.group(0))
    kept = [
        d for d in result.diagnostics if d.code not in FAULT_CODES and not _OUT_OF_MEMORY.search(d.message)
    ]
    found = ran_out_of_memory(result.path, procs.memory_limit(), "compileMemoryMB", line)
    return replace(result, diagnostics=[*kept, found])


def compile_isolated(source: str, path: str, options: CompileOptions) -> CompileResult:
    """compile_source in a shared worker process (the GPU and optimizer paths: the server's own
    process never runs a compiler, and an LLM's candidate that crashes NVRTC costs a worker). A
    compile cut short (deadline, memory) is information, as in every other check."""
    try:
        return run_isolated(compile_source, source, path, options)
    except WorkerFailed as e:
        from ..model import not_checked_in_time

        if e.reason == "timeout":
            found = not_checked_in_time(
                path, JOB_TIMEOUT_S, "KERNEL_LSP_JOB_TIMEOUT_S", f"compiling for {options.arch}"
            )
        elif e.out_of_memory:
            found = ran_out_of_memory(path, COMPILE_MEMORY_MB * 2**20, "KERNEL_LSP_COMPILE_MEMORY_MB", str(e))
        else:
            message = f"compiling {os.path.basename(path)} for {options.arch}: {e}"
            found = Diagnostic(path, 1, 1, Severity.ERROR, message, code="crash", source="kernel-lsp")
        return CompileResult(path, options.arch, False, [found])


def compile_file(path: str, options: CompileOptions) -> CompileResult:
    source, problem = read_source(path)
    if source is None:
        assert problem is not None
        return CompileResult(path, options.arch, False, [problem])
    return compile_source(source, path, options)
