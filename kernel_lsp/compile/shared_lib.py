"""A `.cu` built into a shared library for host-entry specs: the GPU worker loads it with ctypes
and calls the entry (a host function) with device buffers and scalars.

    nvcc -c -Xcompiler -fPIC --keep <the file's usual nvcc flags>   -> host object + device CUBIN
    (a candidate: the fence checks its text and that object here)
    nvcc -shared -cudart none -o lib.so obj.o -Xlinker <libcudart.so>

cudart is linked SHARED, on purpose: every library the worker loads (the user's, a baseline, each
candidate) then uses the one runtime the worker loads from its own environment, in the device's
primary context, so device pointers, the last error (read after each call) and the `__device__`
variables' addresses (`cudaGetSymbolAddress` on the library's host shadows) all come from one
place; `dlclose` unregisters a library's kernels. A static cudart would put a private runtime in
every candidate, with state the worker cannot see. The library names `libcudart.so.<major>` by its
SONAME only (no RPATH): the worker resolves it, not a path on the machine that compiled.

The build goes through the nvcc backend's temporary folder (`compile/nvcc.py`), so findings,
per-kernel resources and the CUBIN come in the same CompileResult as every compile.
"""

from __future__ import annotations

import glob
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ..model import CompileResult, Diagnostic, LibraryBuild, Severity  # LibraryBuild: re-exported
from .cache import CompileCache
from .nvcc import NVCC_TIMEOUT_S, _compile_in_temp_dir, _tool_diagnostic
from .options import CompileOptions
from .toolchain import find_toolchain

LINK_SOURCE = "kernel-lsp link"


@dataclass(frozen=True)
class _NoFence:
    """A finding of this module's own (the fence's Finding lives above the compile layer)."""

    kind: str
    message: str
    line: int = 0
    symbol: str = ""


_cache: CompileCache[LibraryBuild] = CompileCache(capacity=32)  # libraries are larger than CUBINs


def cudart_library(nvcc: str) -> str | None:
    """The shared cudart next to an nvcc (a toolkit's lib64/, the pip wheel's lib/)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(nvcc)))
    for folder in ("lib64", "lib", os.path.join("targets", "*", "lib")):
        for name in ("libcudart.so", "libcudart.so.[0-9]*"):
            found = sorted(glob.glob(os.path.join(root, folder, name)))
            if found:
                return found[0]
    return None


def _link(nvcc: str, host_compiler_flags: list[str], arch: str, obj: str, out: str) -> tuple[bool, str]:
    cudart = cudart_library(nvcc)
    if cudart is None:
        return False, f"no shared cudart (libcudart.so) next to {nvcc}"
    command = [nvcc, "-shared", "-cudart", "none", f"-arch={arch}", *host_compiler_flags, "-o", out, obj]
    command += ["-Xlinker", cudart]
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=NVCC_TIMEOUT_S,
            check=False,
            cwd=os.path.dirname(obj),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"the link step failed: {e}"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


class Fence(Protocol):
    """The static checks of host code someone else wrote (kernel_lsp.fence provides them)."""

    def check_source(
        self,
        source: str,
        original_source: str | None,
        original_path: str | None = None,
        include_dirs: Sequence[str] = (),
    ) -> list: ...

    def check_object(self, object_path: str) -> list: ...

    def check_diagnostics(self, diagnostics: Sequence[Diagnostic], path: str) -> list: ...


def compile_library(
    source: str,
    path: str,
    options: CompileOptions,
    candidate_of: str | None = None,
    use_cache: bool = True,
    fence: Fence | None = None,
) -> LibraryBuild:
    """Build `source` into a shared library. `candidate_of`: the original file's text when
    `source` is a candidate someone else (an LLM) wrote: `fence` (the `kernel_lsp.fence`
    module) checks its text and host object, and a candidate with findings is not linked; a
    candidate without a fence is never built. Never raises."""
    if candidate_of is not None and fence is None:
        return LibraryBuild(
            CompileResult(path, options.arch, False),
            fence=[_NoFence("object", "a candidate is built only with the fence's checks")],
            trusted=False,
        )
    toolchain = find_toolchain(options.extra)
    if toolchain.problem:
        return LibraryBuild(_tool_diagnostic(path, options, toolchain.problem), trusted=candidate_of is None)
    trusted = candidate_of is None
    key = ""
    if use_cache:
        key = CompileCache.key(source, path, options) + str(toolchain) + f"|library|{candidate_of!r}"
        hit = _cache.get(key)
        if hit is not None:
            return replace(hit, result=replace(hit.result, cached=True))
    build = LibraryBuild(CompileResult(path, options.arch, False), trusted=trusted, options=options)
    if not trusted:
        # The text first: an include of a file outside the allowlist is never even read by nvcc
        # (its contents would come back in the compiler's messages).
        assert fence is not None
        # The original's own headers are found beside it and in its include folders; CUDA's in
        # CUDA's folders (the fence knows them).
        build.fence = fence.check_source(source, candidate_of, path, options.include_dirs)
        if build.fence:
            return build
    lib_options = replace(options, host_check=True, extra=(*options.extra, "-Xcompiler", "-fPIC"))
    ccbin = [f for f in options.extra if f.startswith(("-ccbin", "--compiler-bindir"))]

    def link(obj: str) -> None:
        if not trusted:
            assert fence is not None
            build.fence = fence.check_object(obj)
            if build.fence:
                return
        out = os.path.join(os.path.dirname(obj), "entry.so")
        assert toolchain.nvcc is not None
        ok, log = _link(toolchain.nvcc, ccbin, options.arch, obj, out)
        build.link_log = log
        if ok and os.path.isfile(out):
            with open(out, "rb") as f:
                build.library = f.read()

    start = time.perf_counter()
    try:
        build.result = _compile_in_temp_dir(source, path, lib_options, toolchain, link)
    except OSError as e:
        build.result = _tool_diagnostic(path, options, f"nvcc could not run: {e}")
    build.result.duration_s = time.perf_counter() - start
    if not trusted and not build.fence:
        # What only the compiler can tell (arithmetic on a function's address, through any
        # variable): the library is dropped before anything loads it.
        assert fence is not None
        build.fence = fence.check_diagnostics(build.result.diagnostics, path)
        if build.fence:
            build.library = None
    if build.result.ok and build.library is None and not build.fence:
        build.result.ok = False
        build.result.diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                Severity.ERROR,
                f"the shared library did not link: {build.link_log[-500:] or 'no output'}",
                code="nvcc-link",
                source=LINK_SOURCE,
            )
        )
    if use_cache and not any(d.code in ("nvcc", "nvcc-link") for d in build.result.diagnostics):
        _cache.put(key, build)
    return build
