"""The NVRTC backend: device-only CUDA source → CUBIN and a log, in process.

Uses the low-level `cuda.bindings.nvrtc` calls, which need no driver and no GPU (cuda.core's
Program asks the driver for the arch). Never raises: every failure is a Diagnostic.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

from .. import archs
from ..child_python import python_code
from ..model import CompileResult, Diagnostic, Severity
from .artifact import build_result
from .cache import CompileCache
from .options import CompileOptions, cuda_include_dirs
from .toolchain import find_toolchain
from .versions import nvrtc_version

# Where a CUDA driver is installed, NVRTC serves repeated compiles from the driver's compute cache,
# and a cache hit's log has no ptxas resource report (seen on an H200 with NVRTC 13.0; also
# NVIDIA/cuda-python#1124). The resources are the point of compiling here, so never use the cache.
os.environ["CUDA_CACHE_DISABLE"] = "1"


# A process that compiles nothing (the language server: its workers compile) asks NVRTC in a
# short-lived child instead of loading it: loaded, NVRTC's library stays resident, ~44 MiB RSS
# (issue 33). `ask_nvrtc_in_child()` sets it; a process that has NVRTC loaded already asks it.
_ask_in_child = False


def ask_nvrtc_in_child() -> None:
    global _ask_in_child
    _ask_in_child = True


def _in_child() -> bool:
    return _ask_in_child and "cuda.bindings.nvrtc" not in sys.modules


@functools.cache
def _nvrtc_facts_from_child() -> tuple[tuple[str, ...], str]:
    """(supported archs, version) as a child process with NVRTC loaded reports them."""
    # Our own package first on the child's path, and the server's isolation (`python -I`, as the
    # editor starts it) kept: a workspace on PYTHONPATH with a `kernel_lsp/` of its own must not
    # be what the child imports (tests/e2e/test_isolated_launch.py).
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (
        f"import sys; sys.path.insert(0, {package_root!r})\n"
        "import json\n"
        "from kernel_lsp.compile.nvrtc import supported_archs\n"
        "from kernel_lsp.compile.versions import nvrtc_version\n"
        "print(json.dumps([supported_archs(), nvrtc_version()]))"
    )
    try:
        command = [sys.executable, "-I", "-c", code] if sys.flags.isolated else python_code(code)
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
        archs_listed, version = json.loads(out.splitlines()[-1])
        return tuple(archs_listed), str(version)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return (), f"unavailable ({type(e).__name__})"


@functools.cache
def supported_archs() -> tuple[str, ...]:
    if _in_child():
        return _nvrtc_facts_from_child()[0]
    try:
        from cuda.bindings import nvrtc

        err, numbers = nvrtc.nvrtcGetSupportedArchs()
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return tuple(f"sm_{n}" for n in numbers)
    except Exception:
        pass
    return ()


@functools.cache
def known_diagnostic_number(number: int) -> bool:
    """Whether NVRTC's front end (EDG's, which nvcc's cudafe++ shares: `177-D` is one warning in
    both) has a diagnostic of this number: it refuses any other in `--diag-suppress` ("invalid
    error number"), and so tells a typo (`--select 9999`) from a code. True where NVRTC cannot
    be asked here (a process that compiles nothing, or NVRTC missing): nothing is refused then.
    The first ask compiles an empty program, ~50 ms; each later one well under a millisecond."""
    if _in_child():
        return True
    try:
        from cuda.bindings import nvrtc

        err, program = nvrtc.nvrtcCreateProgram(b"", b"numbers.cu", 0, [], [])
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return True
        try:
            option = f"--diag-suppress={number}".encode()
            (result,) = nvrtc.nvrtcCompileProgram(program, 1, [option])
            if result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
                return True
            if result == nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION:  # 0: "a non-zero positive integer"
                return False
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
        finally:
            nvrtc.nvrtcDestroyProgram(program)
    except Exception:  # the wheel missing or not loadable
        return True
    return b"invalid error number" not in log


def check_arch(arch: str) -> str | None:
    """A message when NVRTC cannot compile for `arch`, else None."""
    supported = supported_archs()
    if archs.arch_number(arch) is None or (supported and arch.rstrip("af") not in supported):
        listed = ", ".join(supported) if supported else "unknown (NVRTC not loaded)"
        version = _nvrtc_facts_from_child()[1] if _in_child() else nvrtc_version()
        return f"unknown or unsupported arch `{arch}`; this NVRTC ({version}) supports: {listed}"
    return None


_cache: CompileCache[CompileResult] = CompileCache()


# --- compile ----------------------------------------------------------------------------------


def nvrtc_flags(path: str, options: CompileOptions) -> list[str]:
    flags = [
        f"-arch={options.arch}",
        f"-std={options.std}",
        "--ptxas-options=-v",
        "--ptxas-options=--warn-on-spills",
        "-lineinfo",
        f"-I{os.path.dirname(os.path.abspath(path))}",
    ]
    # NVRTC has no -isystem: system folders are searched like the others, after them.
    flags += [f"-I{d}" for d in (*options.include_dirs, *options.system_include_dirs)]
    flags += [f"-I{d}" for d in cuda_include_dirs()]
    flags += [f"-D{d}" for d in options.defines]
    flags += [f"-U{u}" for u in options.undefines]
    # NVRTC 13 knows neither --expt-relaxed-constexpr nor --extended-lambda: files that need them
    # go to nvcc (see compile_source's choice of backend).
    if options.default_device:
        flags.append("-default-device")
    flags += list(options.extra)
    return flags


def _program(source: str, path: str) -> tuple[str, str, list[str], list[str]]:
    """(text, name, header texts, header names) of the NVRTC program for `path`. A header is
    checked in place: a one-line program includes it by its real path, and its editor text is
    handed to NVRTC under that path, so a neighbour that includes it back reaches the same file
    and `#pragma once` holds (compiled as the program itself, it was read twice)."""
    real = os.path.abspath(path)
    if path.endswith(".cu") or '"' in real or "\n" in real:
        return source, real, [], []
    return f'#include "{real}"\n', real + _HEADER_PROGRAM, [source], [real]


_HEADER_PROGRAM = ".kernel-lsp.cu"  # the suffix of a header's one-line program (never on disk)


def _run_nvrtc(source: str, path: str, flags: list[str]) -> tuple[bool, str, bytes | None]:
    from cuda.bindings import nvrtc

    text, name, headers, names = _program(source, path)
    err, prog = nvrtc.nvrtcCreateProgram(
        text.encode("utf-8", "surrogatepass"),
        name.encode(),
        len(headers),
        [h.encode("utf-8", "surrogatepass") for h in headers],
        [n.encode() for n in names],
    )
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return False, f"nvrtc: error: nvrtcCreateProgram failed: {err.name}", None
    try:
        encoded = [f.encode() for f in flags]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        cubin = None
        if result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, csize = nvrtc.nvrtcGetCUBINSize(prog)
            cubin = b" " * csize
            nvrtc.nvrtcGetCUBIN(prog, cubin)
        elif result == nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION and not log.strip(b" \x00"):
            log = f"nvrtc: error: invalid option in {' '.join(flags)}".encode()
        text_log = log.decode("utf-8", "replace").replace(name, os.path.abspath(path))
        return result == nvrtc.nvrtcResult.NVRTC_SUCCESS, text_log, cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_nvrtc(source: str, path: str, options: CompileOptions, use_cache: bool = True) -> CompileResult:
    """Compile one file for one arch. Never raises."""
    arch_problem = check_arch(options.arch)
    if arch_problem:
        return CompileResult(
            path,
            options.arch,
            False,
            [Diagnostic(path, 1, 1, Severity.ERROR, arch_problem, code="arch", source="kernel-lsp")],
        )
    # The host-code finding names what is missing for nvcc, so that is part of the key.
    key = (
        CompileCache.key(source, path, options) + str(find_toolchain(options.extra).problem)
        if use_cache
        else ""
    )
    if use_cache and (hit := _cache.get(key)) is not None:
        return replace(hit, cached=True)
    start = time.perf_counter()
    try:
        ok, log, cubin = _run_nvrtc(source, path, nvrtc_flags(path, options))
    except Exception as e:  # NVRTC missing or broken: the tool failed, not the file
        return CompileResult(
            path,
            options.arch,
            False,
            [
                Diagnostic(
                    path,
                    1,
                    1,
                    Severity.ERROR,
                    f"NVRTC could not run: {e}",
                    code="nvrtc",
                    source="kernel-lsp",
                )
            ],
            log=str(e),
        )
    result = build_result(source, path, options, ok, log, cubin)
    result.duration_s = time.perf_counter() - start
    if use_cache:
        _cache.put(key, result)
    return result
