"""The compile engine: CUDA source → NVRTC → Diagnostics, per-kernel resources and CUBIN.

Uses the low-level `cuda.bindings.nvrtc` calls, which need no driver and no GPU (cuda.core's
Program asks the driver for the arch). Never raises: every failure is a Diagnostic.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import multiprocessing
import os
import re
import shutil
import subprocess
import threading
import time
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from . import archs
from .hostcode import find_host_code, host_code_message
from .logparse import parse_log, source_name
from .model import CompileResult, Diagnostic, KernelResources, Severity
from .source import find_includes, find_kernels, parse_directives

FALLBACK_ARCH = "sm_90"

# Where a CUDA driver is installed, NVRTC serves repeated compiles from the driver's compute cache,
# and a cache hit's log has no ptxas resource report (seen on an H200 with NVRTC 13.0; also
# NVIDIA/cuda-python#1124). The resources are the point of compiling here, so never use the cache.
os.environ["CUDA_CACHE_DISABLE"] = "1"
MAX_FILE_BYTES = 2 * 1024 * 1024


def compile_pool(workers: int, initializer=None) -> ProcessPoolExecutor:
    """Worker processes for NVRTC (it serialises compiles within one process). Started with
    "spawn": the server forks from a process with threads (pygls, watchdog, the GPU client), which
    is unsafe, and a fresh process holds no state of the parent's NVRTC."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer
    )


# A check that runs longer than this is stuck, in a spec that never returns (NVRTC itself has no
# unbounded loops): its worker is ended and the file gets a diagnostic.
JOB_TIMEOUT_S = float(os.environ.get("KERNEL_LSP_JOB_TIMEOUT_S", "120"))


def end_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a compile pool now: an NVRTC call or a stuck spec cannot be interrupted, and the
    interpreter would join the workers at exit."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        with contextlib.suppress(Exception):  # already gone
            w.terminate()


@dataclass(frozen=True)
class CompileOptions:
    arch: str = FALLBACK_ARCH
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # "NAME=value" or "NAME" -> -D
    default_device: bool = False
    extra: tuple[str, ...] = ()  # more NVRTC flags
    std: str = "c++17"

    def with_arch(self, arch: str) -> CompileOptions:
        return replace(self, arch=arch)


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The cudart and cccl header folders of NVIDIA's pip wheels (NVRTC adds none by itself)."""
    try:
        from cuda import pathfinder
    except ImportError:
        return ()
    dirs = []
    for lib in ("cudart", "cccl"):
        try:
            d = pathfinder.find_nvidia_header_directory(lib)
        except Exception:  # pathfinder raises its own errors for missing wheels
            d = None
        if d:
            dirs.append(str(d))
    return tuple(dirs)


@functools.cache
def supported_archs() -> tuple[str, ...]:
    try:
        from cuda.bindings import nvrtc

        err, numbers = nvrtc.nvrtcGetSupportedArchs()
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return tuple(f"sm_{n}" for n in numbers)
    except Exception:
        pass
    return ()


@functools.cache
def nvrtc_version() -> str:
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception as e:
        return f"unavailable ({e})"


@functools.cache
def local_gpu_arch() -> str | None:
    """The compute capability of the first visible GPU, asked of nvidia-smi so the server never
    creates a CUDA context for it."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return None
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out:
        return None
    major, _, minor = out[0].partition(".")
    return f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None


def resolve_arch(arch: str | None) -> str:
    """ "auto" (or nothing) means the local GPU's arch, else sm_90."""
    if not arch or arch == "auto":
        return local_gpu_arch() or FALLBACK_ARCH
    return arch.strip()


def check_arch(arch: str) -> str | None:
    """A message when NVRTC cannot compile for `arch`, else None."""
    supported = supported_archs()
    if archs.arch_number(arch) is None or (supported and arch.rstrip("af") not in supported):
        listed = ", ".join(supported) if supported else "unknown (NVRTC not loaded)"
        return f"unknown or unsupported arch `{arch}`; this NVRTC ({nvrtc_version()}) supports: {listed}"
    return None


# --- includes ---------------------------------------------------------------------------------


def resolve_include(target: str, quoted: bool, from_dir: str, include_dirs: tuple[str, ...]) -> str | None:
    """The user header an #include names, or None for CUDA's own or missing headers."""
    search = ([from_dir] if quoted else []) + list(include_dirs)
    for d in search:
        candidate = os.path.normpath(os.path.join(d, target))
        if os.path.isfile(candidate):
            return candidate
    return None


def include_closure(source: str, path: str, include_dirs: tuple[str, ...]) -> dict[str, tuple[int, str]]:
    """Every user header the file reads, directly or through other headers, mapped to
    (line, top-level include target) of the #include in the file itself that leads to it."""
    seen: dict[str, tuple[int, str]] = {}
    base = os.path.dirname(os.path.abspath(path))
    for inc in find_includes(source):
        top = resolve_include(inc.target, inc.quoted, base, include_dirs)
        if not top:
            continue
        stack = [top]
        while stack:
            header = stack.pop()
            if header in seen:
                continue
            seen[header] = (inc.line, inc.target)
            try:
                with open(header, encoding="utf-8", errors="replace") as f:
                    text = f.read(MAX_FILE_BYTES)
            except OSError:
                continue
            for sub in find_includes(text):
                r = resolve_include(sub.target, sub.quoted, os.path.dirname(header), include_dirs)
                if r and r not in seen:
                    stack.append(r)
    return seen


def header_stamps(paths) -> tuple:
    """(path, mtime, size) of each header, for cache keys: a header edited on disk changes it."""
    out = []
    for p in sorted(paths):
        try:
            st = os.stat(p)
            out.append((p, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((p, None, None))
    return tuple(out)


# --- cache ------------------------------------------------------------------------------------


class CompileCache:
    """LRU of results keyed by content, options and the stamps of the user headers read."""

    def __init__(self, capacity: int = 256) -> None:
        self._items: OrderedDict[str, CompileResult] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    @staticmethod
    def key(source: str, path: str, options: CompileOptions) -> str:
        user_dirs = tuple(options.include_dirs)
        headers = include_closure(source, path, user_dirs)
        h = hashlib.sha256()
        h.update(source.encode("utf-8", "surrogatepass"))
        h.update(repr((os.path.abspath(path), options, header_stamps(headers))).encode())
        return h.hexdigest()

    def get(self, key: str) -> CompileResult | None:
        with self._lock:
            r = self._items.get(key)
            if r is not None:
                self._items.move_to_end(key)
            return r

    def put(self, key: str, result: CompileResult) -> None:
        with self._lock:
            self._items[key] = result
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)


_cache = CompileCache()


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
    flags += [f"-I{d}" for d in options.include_dirs]
    flags += [f"-I{d}" for d in cuda_include_dirs()]
    flags += [f"-D{d}" for d in options.defines]
    if options.default_device:
        flags.append("-default-device")
    flags += list(options.extra)
    return flags


def _run_nvrtc(source: str, path: str, flags: list[str]) -> tuple[bool, str, bytes | None]:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode("utf-8"), os.path.abspath(path).encode(), 0, [], [])
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
        return result == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode("utf-8", "replace"), cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _same_file(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


_INT_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+\(?\s*(\d+)\s*\)?\s*$", re.M)


def _literal_block_size(expr: str, defines: tuple[str, ...], source: str = "") -> int | None:
    """The thread count of a launch's block expression when it needs no runtime size. Macros
    come from `#define NAME 256` in the source (the tunables' defaults), then from -D."""
    env: dict[str, int] = {m.group(1): int(m.group(2)) for m in _INT_DEFINE.finditer(source)}
    for d in defines:
        name, _, value = d.partition("=")
        if value.strip().lstrip("-").isdigit():
            env[name.strip()] = int(value)
    try:
        v = eval(expr, {"__builtins__": {}}, env)
    except Exception:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        n = 1
        for x in v:
            n *= x
        return n
    return None


@dataclass
class _Context:
    source: str
    path: str
    options: CompileOptions
    diagnostics: list[Diagnostic] = field(default_factory=list)


def compile_source(source: str, path: str, options: CompileOptions, use_cache: bool = True) -> CompileResult:
    """Compile one file for one arch. Never raises."""
    arch_problem = check_arch(options.arch)
    if arch_problem:
        return CompileResult(
            path,
            options.arch,
            False,
            [Diagnostic(path, 1, 1, Severity.ERROR, arch_problem, code="arch", source="kernel-lsp")],
        )
    key = CompileCache.key(source, path, options) if use_cache else ""
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


def build_result(
    source: str, path: str, options: CompileOptions, ok: bool, log: str, cubin: bytes | None
) -> CompileResult:
    parsed = parse_log(log, default_path=os.path.abspath(path))
    headers = include_closure(source, path, options.include_dirs)
    diags: list[Diagnostic] = []
    for d in parsed.diagnostics:
        if _same_file(d.path, path):
            diags.append(replace(d, path=path))
            continue
        diags.append(d)
        # An error inside a header also shows at the #include line that leads to it.
        if d.severity >= Severity.WARNING:
            line, _ = headers.get(os.path.normpath(d.path), (None, None))
            if line is None:
                line, _ = _include_line_for(source, d.path)
            diags.append(
                Diagnostic(
                    path,
                    line or 1,
                    1,
                    d.severity,
                    f"in included header {os.path.basename(d.path)}:{d.line}:{d.col}: {d.message}",
                    code=d.code,
                    end_col=0,
                    related=((d.path, d.line, d.col, d.message),),
                )
            )
    for message in parsed.option_errors:
        diags.append(
            Diagnostic(
                path,
                1,
                1,
                Severity.ERROR,
                f"NVRTC rejected an option: {message}",
                code="option",
                source="kernel-lsp",
            )
        )
    diags = [_explain_missing_header(d, path, options) for d in diags]

    if not ok:
        host = find_host_code(source)
        if host and not options.default_device:
            first = host[0]
            hidden = sum(1 for d in diags if d.severity == Severity.ERROR)
            message = host_code_message(host)
            if hidden:
                message += f" ({hidden} NVRTC error(s) hidden until then.)"
            diags = [
                Diagnostic(
                    path,
                    first.line,
                    first.col,
                    Severity.ERROR,
                    message,
                    code="host-code",
                    source="kernel-lsp",
                    related=tuple((path, u.line, u.col, u.what) for u in host[1:]),
                )
            ]
        elif not any(d.severity == Severity.ERROR for d in diags):
            diags.append(
                Diagnostic(
                    path,
                    1,
                    1,
                    Severity.ERROR,
                    "NVRTC failed without a message: " + log.strip()[:500],
                    code="nvrtc",
                    source="kernel-lsp",
                )
            )

    kernels = _kernel_resources(source, path, options, parsed.resources)
    for k in kernels:
        if k.spills:
            diags.append(
                Diagnostic(
                    path,
                    k.line or 1,
                    1,
                    Severity.WARNING,
                    f"kernel `{k.name}` spills to local memory on {k.arch}: {k.spill_store_bytes} bytes "
                    f"spill stores, {k.spill_load_bytes} bytes spill loads",
                    code="spill",
                    source="kernel-lsp",
                )
            )
    # ptxas repeats --warn-on-spills as a line-less warning; the kernel's own diagnostic says more.
    diags = [d for d in diags if not (d.source == "ptxas" and "spill" in d.message.lower())]
    return CompileResult(
        path=path,
        arch=options.arch,
        ok=ok,
        diagnostics=diags,
        kernels=kernels,
        cubin=cubin,
        log=log,
        unparsed=parsed.unparsed,
        includes=sorted(headers),
    )


def _include_line_for(source: str, header_path: str) -> tuple[int | None, str | None]:
    base = os.path.basename(header_path)
    for inc in find_includes(source):
        if os.path.basename(inc.target) == base:
            return inc.line, inc.target
    return None, None


def _explain_missing_header(d: Diagnostic, path: str, options: CompileOptions) -> Diagnostic:
    if "cannot open source file" not in d.message:
        return d
    searched = [
        os.path.dirname(os.path.abspath(path)),
        *options.include_dirs,
        "CUDA headers (cudart, cccl)",
    ]
    return replace(
        d,
        message=f"{d.message}; searched: {', '.join(searched)}. Add its folder to kernelLsp.includeDirs (or --include).",
    )


def _kernel_resources(source: str, path: str, options: CompileOptions, raw: list) -> list[KernelResources]:
    signatures = {k.name: k for k in find_kernels(source)}
    directives = parse_directives(source)
    out = []
    for r in raw:
        name = source_name(r.mangled)
        sig = signatures.get(name)
        launches = directives.launches_of(name)
        block = _literal_block_size(launches[0].block, options.defines, source) if launches else None
        dyn = _literal_block_size(launches[0].smem, options.defines, source) if launches else 0
        occ = archs.occupancy(r.arch, block, r.registers, r.shared_bytes, dyn or 0) if block else None
        out.append(
            KernelResources(
                name=name,
                mangled=r.mangled,
                arch=r.arch,
                registers=r.registers,
                shared_bytes=r.shared_bytes,
                stack_bytes=r.stack_bytes,
                spill_store_bytes=r.spill_store_bytes,
                spill_load_bytes=r.spill_load_bytes,
                barriers=r.barriers,
                const_bytes=r.const_bytes,
                line=sig.line if sig else 0,
                block_size=block,
                occupancy=occ,
            )
        )
    out.sort(key=lambda k: (k.line or 1 << 30, k.name))
    return out


# --- files ------------------------------------------------------------------------------------


def read_source(path: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[str | None, Diagnostic | None]:
    """The file's text, or a Diagnostic that says why it is not checked."""

    # WARNING like decode_source: the same too-large file must not be "info" from disk and
    # "warning" from the editor's text.
    def skip(message: str, sev: Severity = Severity.WARNING) -> tuple[None, Diagnostic]:
        return None, Diagnostic(path, 1, 1, sev, message, code="not-checked", source="kernel-lsp")

    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            return skip(
                f"not checked: the file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit (kernelLsp.maxFileBytes)"
            )
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return skip("not checked: the file no longer exists", Severity.WARNING)
    except OSError as e:
        return skip(f"not checked: cannot read the file ({e.strerror})", Severity.WARNING)
    return decode_source(data, path, max_bytes)


def decode_source(
    data: bytes, path: str, max_bytes: int = MAX_FILE_BYTES
) -> tuple[str | None, Diagnostic | None]:
    def skip(message: str) -> tuple[None, Diagnostic]:
        return None, Diagnostic(
            path, 1, 1, Severity.WARNING, message, code="not-checked", source="kernel-lsp"
        )

    if len(data) > max_bytes:
        return skip(
            f"not checked: the file is {len(data) / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit (kernelLsp.maxFileBytes)"
        )
    if b"\x00" in data[:8192]:
        return skip("not checked: this looks like a binary file (it contains NUL bytes)")
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        return None, Diagnostic(
            path,
            line,
            1,
            Severity.WARNING,
            f"not checked: the file is not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}, line {line}); save it as UTF-8",
            code="not-checked",
            source="kernel-lsp",
        )


def compile_file(path: str, options: CompileOptions) -> CompileResult:
    source, problem = read_source(path)
    if source is None:
        assert problem is not None
        return CompileResult(path, options.arch, problem.severity < Severity.ERROR and False, [problem])
    return compile_source(source, path, options)
