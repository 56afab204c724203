"""The compile stage: CUDA source → a compiler backend → one compiled artifact (`CompileResult`:
findings, per-kernel resources, CUBIN, the headers read). Never raises on user input.

Backends: `nvcc` (a subprocess, run as the file's build runs it: its verdict is the truth) and
`nvrtc` (in process, a tenth of nvcc's time: it answers where it sees what nvcc sees, verdict.py).
The flag sources, the log parser and the artifact builder are shared by every backend.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from .. import procs
from ..files import read_source
from ..model import FAULT_CODES, CompileResult, Diagnostic, Severity, ran_out_of_memory
from .includes import blocked_includes, header_stamps, include_closure, resolve_include
from .jobs import report_preview
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
from .verdict import NEEDS_NVCC, Choice, choose, nvrtc_only_error
from .versions import nvrtc_version

__all__ = [
    "COMPILE_MEMORY_MB",
    "FALLBACK_ARCH",
    "FRONT_END",
    "FULL",
    "JOB_TIMEOUT_S",
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
    "end_pool",
    "find_toolchain",
    "header_stamps",
    "include_closure",
    "known_diagnostic_number",
    "local_gpu_arch",
    "nvrtc_version",
    "resolve_arch",
    "resolve_include",
    "supported_archs",
]


def choose_backend(source: str, options: CompileOptions, path: str = "source.cu") -> str:
    """ "nvrtc" or "nvcc": the compiler that runs first for this text (verdict.py says whose
    verdict stands). nvcc where it decides and can run; NVRTC otherwise (a missing nvcc or host
    compiler is then said in the result)."""
    return _runs_first(choose(source, path, options), options)


def _runs_first(choice: Choice, options: CompileOptions) -> str:
    if choice.backend == "nvcc" and (options.compiler == "nvcc" or _nvcc_problem(options) is None):
        return "nvcc"
    return "nvrtc"


def _nvcc_problem(options: CompileOptions) -> str | None:
    return find_toolchain(options.extra).problem


def compile_source(source: str, path: str, options: CompileOptions, use_cache: bool = True) -> CompileResult:
    """Compile one file for one arch and give the verdict nvcc, run as the file's build runs it,
    gives (verdict.py): NVRTC answers where it sees what nvcc sees and finds nothing wrong; every
    other verdict is nvcc's. A define that cannot be passed as written is left out, with an error
    at the top of the file. Headers no compiler must be handed (a FIFO, a device, a huge file) are
    errors at their #include."""
    if blocked := blocked_includes(source, path, options):
        return CompileResult(path, options.arch, False, blocked)
    options, refused = usable_macros(options)
    choice = choose(source, path, options)
    if _runs_first(choice, options) == "nvcc":
        result = compile_nvcc(source, path, options, use_cache)
    else:
        result = compile_nvrtc(source, path, options, use_cache)
        if _has_errors(result) and not choice.nvrtc_alone:
            problem = _nvcc_problem(options)
            if problem is None:
                if choice.nvrtc_first and not _jit_only(result):
                    report_preview(result)  # the editor shows NVRTC's errors while nvcc decides
                result = compile_nvcc(source, path, options, use_cache)  # nvcc decides
            else:
                result = _without_nvcc(result, choice, problem)
    return _with_refused(_memory_verdict(result), path, refused)


def _jit_only(result: CompileResult) -> bool:
    """NVRTC's result has an error only JIT mode gives: no first look to show."""
    return any(d.severity == Severity.ERROR and nvrtc_only_error(d.message) for d in result.diagnostics)


def _has_errors(result: CompileResult) -> bool:
    """NVRTC failed on the text, or could not run: nvcc decides. Not where NVRTC's failure says
    nothing about the text (it ran out of memory: nvcc would too) or where no compiler ran (an arch
    NVRTC does not know is refused first: archs are checked against NVRTC's list whichever
    compiler decides)."""
    if any(d.code == "arch" or d.code in FAULT_CODES - {"nvrtc"} for d in result.diagnostics):
        return False
    if _OUT_OF_MEMORY.search(result.log):
        return False
    return not result.ok or any(d.severity == Severity.ERROR for d in result.diagnostics)


def _without_nvcc(result: CompileResult, choice: Choice, problem: str) -> CompileResult:
    """NVRTC's failed verdict where nvcc should decide and cannot run (no nvcc, no host compiler):
    its errors stand where NVRTC sees what nvcc sees, except those only JIT mode gives; otherwise
    one error says why nvcc is needed and what to install (NVRTC's host-code finding already says
    both)."""
    if any(d.code == "host-code" for d in result.diagnostics):
        return result
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    if choice.nvrtc_first:
        false = [d for d in errors if nvrtc_only_error(d.message)]
        if not false:
            return result
        why = f"NVRTC (JIT mode) reports `{false[0].message}` (line {false[0].line}), which nvcc may not"
    else:
        false = errors
        why = f"NVRTC does not see this file as nvcc does: {choice.why_nvcc}"
    found = Diagnostic(
        result.path,
        1,
        1,
        Severity.ERROR,
        f"{why}; nvcc decides, and cannot run here: {problem}",
        code=NEEDS_NVCC,
        source="kernel-lsp",
    )
    return replace(result, diagnostics=[found, *(d for d in result.diagnostics if d not in false)])


def _with_refused(result: CompileResult, path: str, refused: list[str]) -> CompileResult:
    if not refused:
        return result
    found = [
        Diagnostic(path, 1, 1, Severity.ERROR, f"{p}; left out", code="define", source="kernel-lsp")
        for p in refused
    ]
    return replace(result, diagnostics=found + result.diagnostics)  # a copy: the caches hold `result`


def compile_front_end(source: str, path: str, options: CompileOptions) -> CompileResult | None:
    """A first look for the editor while the full check runs, where nvcc decides: NVRTC's result
    where it sees what nvcc sees (a database entry that runs nvcc), else nvcc's front end alone
    (its findings, no resources; a full result already cached comes back whole); nvcc's verdict
    replaces it. None where there is nothing quicker to say than the full check: NVRTC answers
    (the full check itself reports its errors first, `report_preview`, while nvcc decides), nvcc
    cannot run, or NVRTC's look shows an error only JIT mode gives."""
    if blocked_includes(source, path, options):
        return None  # the full check says so at once
    options, refused = usable_macros(options)
    choice = choose(source, path, options)
    if choice.backend == "nvrtc" or (options.compiler != "nvcc" and _nvcc_problem(options) is not None):
        return None
    if choice.nvrtc_first:
        result = compile_nvrtc(source, path, options)
        if _jit_only(result):
            return None
        result = replace(result, stage=FRONT_END)
    else:
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
