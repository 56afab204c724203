"""User headers a file reads, found from its `#include` lines (no compiler needed), their stamps
for cache keys, and the headers no compiler must be handed (a FIFO, a device, a huge file)."""

from __future__ import annotations

import os
import stat

from ..files import MAX_FILE_BYTES, MAX_HEADER_BYTES, read_text_prefix, regular_file_problem
from ..model import Diagnostic, Severity
from ..source import find_includes
from .options import CompileOptions


def resolve_include(target: str, quoted: bool, from_dir: str, include_dirs: tuple[str, ...]) -> str | None:
    """The user header an #include names, or None for CUDA's own or missing headers. The first
    candidate that exists and is not a folder wins, as in the compilers: a FIFO or a device found
    first is what they would open (`blocked_includes` reports it)."""
    search = [""] if os.path.isabs(target) else ([from_dir] if quoted else []) + list(include_dirs)
    for d in search:
        candidate = os.path.normpath(os.path.join(d, target))
        try:
            st = os.stat(candidate)
        except (OSError, ValueError):
            continue
        if not stat.S_ISDIR(st.st_mode):
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
            text = read_text_prefix(header, MAX_FILE_BYTES)  # None for a FIFO: never blocks
            for sub in find_includes(text or ""):
                r = resolve_include(sub.target, sub.quoted, os.path.dirname(header), include_dirs)
                if r and r not in seen:
                    stack.append(r)
    return seen


def header_stamps(paths) -> tuple:
    """(path, mtime, size) of each header, for cache keys: a header edited on disk changes it."""
    out: list[tuple[str, int | None, int | None]] = []
    for p in sorted(paths):
        try:
            st = os.stat(p)
            out.append((p, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((p, None, None))
    return tuple(out)


def _problem(p: str) -> str | None:
    """Why the compiler must not read `p`, with what it would do, or None."""
    try:
        found = regular_file_problem(p, os.stat(p), MAX_HEADER_BYTES)
    except (OSError, ValueError):
        return None  # missing: the compiler says so itself
    if found is None:
        return None
    would = "hold it all in memory" if found.size is not None else "wait on it or read it without end"
    return f"{found.reason}; not compiled: the compiler would {would}"


def blocked_includes(source: str, path: str, options: CompileOptions) -> list[Diagnostic]:
    """Headers the compiler must not be given, each an error where it comes in: at the #include
    line that leads to it, or at the top for a `-include` from the project's flags. A FIFO or a
    device would block the compiler or feed it forever (`-include /dev/zero` grew cc1plus to
    24 GB), a huge file would take all memory. NVRTC and nvcc open headers themselves, so this
    is checked before they run."""
    found: list[Diagnostic] = []
    for flag in options.extra:
        if flag.startswith("--pre-include="):
            pre = flag.split("=", 1)[1]
            if reason := _problem(pre):
                found.append(_at(path, 1, f"`-include {pre}` (from the project's flags) is {reason}"))
    for header, (line, target) in include_closure(source, path, tuple(options.include_dirs)).items():
        if reason := _problem(header):
            found.append(_at(path, line, f'#include "{target}": {header} is {reason}'))
    return found


def _at(path: str, line: int, message: str) -> Diagnostic:
    return Diagnostic(path, line, 1, Severity.ERROR, message, code="include-not-regular", source="kernel-lsp")
