"""What a compile is asked to do (arch, include folders, defines), independent of the backend,
and where the CUDA headers and the local GPU's arch come from."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import replace

# Plain data of the model layer, so that what reads a compile's options (the optimizer) needs no
# compile machinery to name them.
from ..model import FALLBACK_ARCH, CompileOptions  # re-exported

# `-DNAME`, `-DNAME=value`, `-DNAME(a, b)=body`: what the preprocessor takes as a macro name.
_MACRO_NAME = re.compile(r"[A-Za-z_]\w*(\([\w \t,.]*\))?")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def define_problem(define: str) -> str | None:
    """Why a define (`NAME`, `NAME=value`) cannot be passed as it is written, or None. A value
    ends at a line break on the command line and in a `#define` line alike (nvcc passes defines
    as `#define` lines, see nvcc_args.py), so a line break, another control character or a final
    backslash (which would join the next line) is refused rather than cut."""
    name, _, value = define.partition("=")
    if not _MACRO_NAME.fullmatch(name):
        return f"define `{define[:80]}`: `{name[:80]}` is not a macro name"
    if _CONTROL.search(value):
        return f"define `{name}`: its value holds a line break or another control character"
    if value.endswith("\\"):
        return f"define `{name}`: its value ends with a backslash"
    return None


def undefine_problem(name: str) -> str | None:
    return None if _IDENTIFIER.fullmatch(name) else f"undefine `{name[:80]}` is not a macro name"


def usable_macros(options: CompileOptions) -> tuple[CompileOptions, list[str]]:
    """The options without the defines and undefines that cannot be passed, and why each was
    left out (for a diagnostic on the file)."""
    problems = [p for d in options.defines if (p := define_problem(d))]
    problems += [p for u in options.undefines if (p := undefine_problem(u))]
    if not problems:
        return options, []
    return (
        replace(
            options,
            defines=tuple(d for d in options.defines if define_problem(d) is None),
            undefines=tuple(u for u in options.undefines if undefine_problem(u) is None),
        ),
        problems,
    )


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
