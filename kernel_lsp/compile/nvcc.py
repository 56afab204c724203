"""The nvcc backend: host+device CUDA source → CUBIN and a log, through the nvcc executable.

The editor's text is compiled, not the file on disk, and nothing is written into the user's
folders: the text goes to a temporary folder behind `#line 1 "<real path>"`, so every finding
names the real file, and the file's own folder is searched for quoted includes (`-iquote`), so
they find the same neighbours they would find beside it, and angle includes do not. Never raises:
a missing tool, a flag nvcc rejects, a crash or a hang is a Diagnostic.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace

from .. import procs, tempdirs
from ..files import MAX_FILE_BYTES, read_regular
from ..model import CompileResult, Diagnostic, Severity, not_checked_in_time
from .artifact import build_result
from .cache import CompileCache
from .cancel import cancelled
from .nvcc_args import NvccArgs
from .options import CompileOptions
from .toolchain import Toolchain, find_toolchain
from .verdict import build_pass

# nvcc on a large file takes seconds; one that takes this long is stuck (or a template recursion
# without end) and is killed with everything it started. The `compileTimeoutSeconds` setting
# (CompileOptions.timeout_s) overrides it.
NVCC_TIMEOUT_S = float(os.environ.get("KERNEL_LSP_NVCC_TIMEOUT_S", "60"))
PRE_INCLUDE = "--pre-include="

# What raises nvcc's time limit, as "not checked in time" names it.
TIMEOUT_SETTING = (
    "compileTimeoutSeconds (`compile-timeout-seconds` in pyproject.toml, KERNEL_LSP_NVCC_TIMEOUT_S)"
)

# Stages of a compile (CompileResult.stage); SKIPPED: this nvcc cannot run the front end alone.
FULL, FRONT_END, SKIPPED = "full", "front-end", "skipped"

_cache: CompileCache[CompileResult] = CompileCache()


def _tool_diagnostic(path: str, options: CompileOptions, message: str, log: str = "") -> CompileResult:
    return CompileResult(
        path,
        options.arch,
        False,
        [Diagnostic(path, 1, 1, Severity.ERROR, message, code="nvcc", source="kernel-lsp")],
        log=log,
    )


# nvcc's words when its temporary files cannot be written; with a full temporary folder it says
# "Failed to preprocess host compiler properties", which names no folder and no disk.
_NO_ROOM = re.compile(
    r"No space left on device|Failed to preprocess host compiler properties|when writing output to|"
    r"could not write|cannot write"
)
# Below this, a failure to write is the full disk (nvcc's intermediate files of a large file
# take tens of MB).
LOW_DISK_BYTES = 64 * 2**20


def _free_bytes(folder: str) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


def _disk_full(path: str, options: CompileOptions, folder: str, log: str = "") -> CompileResult:
    """nvcc could not write in the temporary folder: say which folder and that it is full."""
    free = _free_bytes(folder)
    message = (
        f"not checked: the temporary folder {folder} is full ({free >> 20} MiB free); nvcc writes its "
        "intermediate files there: free some space, or point TMPDIR at a folder with room"
    )
    return CompileResult(
        path,
        options.arch,
        False,
        [Diagnostic(path, 1, 1, Severity.ERROR, message, code="disk-full", source="kernel-lsp")],
        log=log,
    )


def nvcc_flags(path: str, options: CompileOptions, toolchain: Toolchain, safe: NvccArgs) -> list[str]:
    """nvcc's flags; every value from the workspace goes through `safe` (see nvcc_args.py)."""
    flags = [
        f"-arch={options.arch}",
        f"-std={options.std}",
        "-Xptxas",
        "-v,--warn-on-spills",
        "-lineinfo",
    ]
    # The text is compiled from a temporary folder: the real folder stands in for it, for quoted
    # includes only (-iquote, as beside the file; nvcc preprocesses with the host compiler).
    folder = safe.path(os.path.dirname(os.path.abspath(path)))
    if folder and re.fullmatch(r"[\w./+-]+", folder):
        flags += ["-Xcompiler", "-iquote", "-Xcompiler", folder]
    elif folder:  # -Xcompiler values are split at commas and reach a shell unquoted: -I quotes them
        flags.append(f"-I{folder}")
    flags += [f"-I{d}" for d in map(safe.path, options.include_dirs) if d]
    for d in map(safe.path, options.system_include_dirs):
        if d:
            flags += ["-isystem", d]
    flags += safe.macros(options.defines, options.undefines)
    if options.relaxed_constexpr:
        flags.append("--expt-relaxed-constexpr")
    if options.extended_lambda:
        flags.append("--extended-lambda")
    # -default-device is NVRTC's alone; with nvcc, host code is compiled for the host.
    names_ccbin = any(f.startswith(("-ccbin", "--compiler-bindir")) for f in options.extra)
    if os.environ.get("CXX") and toolchain.host_compiler and not names_ccbin:
        flags += ["-ccbin", toolchain.host_compiler]
    for flag in options.extra:
        if not flag.startswith(PRE_INCLUDE):
            flags.append(flag)
        elif target := safe.path(flag.removeprefix(PRE_INCLUDE)):  # a project's file: a path too
            flags.append(PRE_INCLUDE + target)
    return flags


def _in_generated_code(found: list[Diagnostic], tmp: str, path: str) -> list[Diagnostic]:
    """Findings in the files nvcc generates in its temporary folder (the host pass's
    `*.cudafe1.stub.c`: the host compiler can reject the launch stubs nvcc writes for a kernel)
    belong to the file they were generated for, at its top, naming where they were; each once."""
    out: list[Diagnostic] = []
    for d in found:
        if d.header_copy and d.related and d.related[0][0].startswith(tmp):
            continue  # the copy at the #include: the finding itself is moved to the file
        if d.path.startswith(tmp):
            where = f"{os.path.basename(d.path)}:{d.line}"
            message = f"in the host code nvcc generates for this file ({where}): {d.message}"
            d = replace(d, path=path, line=1, col=1, end_col=0, message=message)
        if d not in out:
            out.append(d)
    return out


def _not_run_by_a_ptx_build(d: Diagnostic) -> Diagnostic:
    """A ptxas error where the file's build is `nvcc --ptx`: that build stops before ptxas and
    succeeds; the driver runs ptxas when it loads the PTX, and fails there. A warning that says so."""
    if d.source != "ptxas" or d.severity != Severity.ERROR:
        return d
    return replace(
        d,
        severity=Severity.WARNING,
        message=f"{d.message} (ptxas; this file's build, nvcc --ptx, does not run it: loading its PTX will fail)",
    )


def _line_directive(path: str) -> str:
    escaped = os.path.abspath(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'#line 1 "{escaped}"\n'


# How often a running nvcc is checked for a cancel request.
_POLL_S = 0.1


def _run(command: list[str], cwd: str, timeout_s: float) -> tuple[int | None, str, str]:
    """(exit code, stdout+stderr, how it ended: "done" | "timeout" | "cancelled"); the exit code
    is None when it was stopped. The whole process group is killed: nvcc's children (cudafe++,
    cicc, ptxas, g++) would outlive it."""
    # Its own session (killed as a group at the deadline); it dies with this process, and the
    # group with this worker (procs). Its memory limit is the worker's (RLIMIT_AS is inherited).
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=procs.tool_preexec(),
        # nvcc's intermediate files (tmpxft_*) go into the folder removed after it, even when it
        # is killed, and a full disk is the one this folder is on.
        env={**os.environ, "TMPDIR": cwd},
    )
    deadline = time.monotonic() + timeout_s
    with procs.tracked_group(proc.pid):
        while True:
            wait_s = min(_POLL_S, max(0.0, deadline - time.monotonic()))
            try:
                out, _ = proc.communicate(timeout=wait_s)
                return proc.returncode, out.decode("utf-8", "replace"), "done"
            except subprocess.TimeoutExpired:
                # communicate() keeps what it read: asking again loses no output.
                stop = "cancelled" if cancelled() else "timeout" if time.monotonic() >= deadline else None
                if stop is not None:
                    break
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:  # a child that left the group could hold the pipe open: do not wait for it
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out = b""
        return None, out.decode("utf-8", "replace"), stop


def compile_nvcc(
    source: str, path: str, options: CompileOptions, use_cache: bool = True, stage: str = FULL
) -> CompileResult:
    """Compile one file for one arch with nvcc. Never raises. `stage="front-end"` runs the front
    end alone (host and device code parsed, templates instantiated, CUDA's call checks; no
    optimizer, no ptxas): the findings of a full compile's front end in a fraction of its time,
    without resources. A full result already cached serves both stages."""
    toolchain = find_toolchain(options.extra)
    if toolchain.problem:
        return _tool_diagnostic(path, options, toolchain.problem)
    key = CompileCache.key(source, path, options) + str(toolchain) if use_cache else ""
    if use_cache and (hit := _cache.get(key)) is not None:
        return replace(hit, cached=True)
    if use_cache and stage != FULL and (hit := _cache.get(key + stage)) is not None:
        return replace(hit, cached=True)
    start = time.perf_counter()
    try:
        result = _compile_in_temp_dir(source, path, options, toolchain, stage=stage)
    except OSError as e:  # no room or no permission for the temporary folder
        if e.errno == errno.ENOSPC:
            return _disk_full(path, options, tempfile.gettempdir())
        return _tool_diagnostic(path, options, f"nvcc could not run: {e}")
    result.duration_s = time.perf_counter() - start
    # A crash, a hang, a full disk or a cancel says nothing about the text: try again next time.
    said_nothing = result.timed_out or result.cancelled or result.stage == SKIPPED
    if (
        use_cache
        and not said_nothing
        and not any(d.code in ("nvcc", "disk-full") for d in result.diagnostics)
    ):
        _cache.put(key if stage == FULL else key + stage, result)
    return result


def _translation_unit(source: str, path: str, tmp: str) -> tuple[str, dict[str, str]]:
    """The text nvcc compiles for `path`, and the folders to name back as the user's.

    A `.cu` file is the main file: its text behind `#line 1 "<real path>"`. A header is checked
    in place, included by a one-line file, so that `#pragma once` and include guards see one file:
    the host compiler's preprocessor keys `#pragma once` on a file's size, time and bytes, so a
    copy of a header that includes itself back (a.cuh -> b.cuh -> a.cuh) was read twice and every
    definition in it "already defined". The real file is included when the editor's text is what
    is on disk; else a mirror of its folder (links to the neighbours, the editor's text under the
    header's own name), so that neighbours that include it back reach the editor's text."""
    real = os.path.abspath(path)
    folder = os.path.dirname(real)
    if path.endswith(".cu") or '"' in real or "\n" in real or not os.path.isfile(real):
        return _line_directive(path) + source, {}
    try:  # a regular file only (never a FIFO), at most what the editor's text may be
        on_disk = read_regular(real, 2 * MAX_FILE_BYTES).removeprefix(b"\xef\xbb\xbf")
    except OSError:  # FileProblem too
        return _line_directive(path) + source, {}
    if on_disk == source.encode("utf-8", "surrogatepass"):
        return f'#include "{real}"\n', {}
    mirror = os.path.join(tmp, "mirror")
    try:
        os.mkdir(mirror)
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n > _MIRROR_LIMIT:
                    raise OSError("too many files to mirror")
                if entry.name != os.path.basename(real):
                    os.symlink(entry.path, os.path.join(mirror, entry.name))
        with open(
            os.path.join(mirror, os.path.basename(real)), "w", encoding="utf-8", errors="surrogatepass"
        ) as f:
            f.write(source)
    except (OSError, UnicodeEncodeError):
        return _line_directive(path) + source, {}
    return f'#include "{os.path.join(mirror, os.path.basename(real))}"\n', {mirror + os.sep: folder + os.sep}


# A header's folder with more entries than this is not mirrored (its unsaved text is compiled as a
# copy, as before): links cost little, but a folder of 100k generated files would.
_MIRROR_LIMIT = 5000


def _compile_in_temp_dir(
    source: str,
    path: str,
    options: CompileOptions,
    toolchain: Toolchain,
    with_object: Callable[[str], None] | None = None,
    stage: str = FULL,
) -> CompileResult:
    """`with_object`: called with the host object's path (`host_check` compiles), inside the
    temporary folder, after a clean compile (the shared-library build links it there)."""
    assert toolchain.nvcc is not None
    timeout_s = options.timeout_s or NVCC_TIMEOUT_S
    with tempdirs.temporary("kernel-lsp-nvcc-") as tmp:
        # nvcc runs its steps through a shell: a quote or space in the name would break them.
        name = re.sub(r"[^\w.+-]", "_", os.path.basename(path)) or "source.cu"
        if not name.endswith(".cu"):
            name += ".cu"  # nvcc picks the language by suffix: a .cuh is CUDA too
        stem = name[: -len(".cu")]
        src = os.path.join(tmp, name)
        text, folders = _translation_unit(source, path, tmp)
        try:
            with open(src, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)
        except (OSError, UnicodeEncodeError) as e:
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                return _disk_full(path, options, os.path.dirname(tmp))
            return _tool_diagnostic(path, options, f"cannot write the temporary copy for nvcc: {e}")
        cubin_path = os.path.join(tmp, stem + ".cubin")
        if stage == FRONT_END:
            # -ptx stops before ptxas; cicc's -lto writes the unoptimised IR, so the optimizer and
            # the code generator never run. The front end (and its CUDA call checks) runs whole.
            mode = ["-ptx", "-Xcicc", "-lto", "-o", os.path.join(tmp, stem + ".ir")]
        elif build_pass(source, path, options) == "host":
            # As the build runs it (a file with host code, a database entry that makes an object):
            # -c also runs the host pass (cudafe++ and the host compiler: host-only errors, such as
            # an `#if __CUDA_ARCH__ < 600` redefinition); --keep leaves the device CUBIN next to
            # the object.
            keep = os.path.join(tmp, "keep")
            os.mkdir(keep)
            mode = ["-c", "-o", os.path.join(tmp, stem + ".o"), "--keep", "--keep-dir", keep]
            cubin_path = os.path.join(keep, f"{stem}.{options.arch}.cubin")
        else:
            mode = ["-cubin", "-o", cubin_path]
        safe = NvccArgs(tmp)
        command = [toolchain.nvcc, *mode, *nvcc_flags(path, options, toolchain, safe), src]
        try:
            code, log, ended = _run(command, tmp, timeout_s)
        except OSError as e:
            return _tool_diagnostic(
                path, options, f"nvcc ({toolchain.nvcc}) could not run: {e.strerror or e}"
            )
        if ended != "done":
            result = CompileResult(path, options.arch, False, log=log, compiler="nvcc", stage=stage)
            if ended == "cancelled":
                result.cancelled = True
            else:
                result.timed_out = True
                result.diagnostics.append(not_checked_in_time(path, timeout_s, TIMEOUT_SETTING, "nvcc"))
            return result
        assert code is not None  # a run that ended "done" has its exit code
        ok = code == 0
        if not ok and _NO_ROOM.search(log) and _free_bytes(tmp) < LOW_DISK_BYTES:
            return _disk_full(path, options, os.path.dirname(tmp), log)
        if stage == FRONT_END:
            if code != 0 and "invalid option" in log and "-lto" in log:
                # A cicc without -lto: no quick first look; the full compile says everything.
                return CompileResult(path, options.arch, False, compiler="nvcc", stage=SKIPPED)
            # After cicc, -ptx has ptxas read its output back as a check; the IR is no PTX, so
            # ptxas always refuses it. Reaching ptxas means the front end passed.
            ptxas = [line for line in log.splitlines() if line.startswith("ptxas")]
            if ptxas:
                ok = True
                log = "\n".join(line for line in log.splitlines() if not line.startswith("ptxas")) + "\n"
        cubin = None
        if ok and stage == FULL and os.path.isfile(cubin_path):
            with open(cubin_path, "rb") as f:
                cubin = f.read()
        if ok and with_object is not None and "-c" in mode:
            with_object(os.path.join(tmp, stem + ".o"))
    # nvcc names the temporary file in a few lines of its own ("... in the compilation of"), and
    # a mirrored header's neighbours by their links.
    log = safe.restore(log.replace(src, os.path.abspath(path)))
    for mirrored, real in folders.items():
        log = log.replace(mirrored, real)
    result = build_result(source, path, options, ok, log, cubin, backend="nvcc")
    result.stage = stage
    result.host_pass = "-c" in mode
    result.diagnostics = _in_generated_code(result.diagnostics, tmp + os.sep, path)
    if options.build_output == "ptx":
        result.diagnostics = [_not_run_by_a_ptx_build(d) for d in result.diagnostics]
    # A header checked on its own is the main file here; its include guard is not a finding.
    result.diagnostics = [d for d in result.diagnostics if d.message != "#pragma once in main file"]
    result.diagnostics += [
        Diagnostic(
            path,
            1,
            1,
            Severity.WARNING,
            f"{p!r} is not passed to nvcc: its shell would read the name, and no link to it could be made",
            code="nvcc-path",
            source="kernel-lsp",
        )
        for p in safe.dropped
    ]
    if not ok and not any(d.severity == Severity.ERROR or d.source == "ptxas" for d in result.diagnostics):
        how = f"was killed by signal {-code}" if code < 0 else f"failed (exit code {code})"
        result.diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                Severity.ERROR,
                f"nvcc {how} without a message: " + (log.strip()[-500:] or "no output"),
                code="nvcc",
                source="kernel-lsp",
            )
        )
    return result
