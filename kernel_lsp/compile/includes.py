"""User headers a file reads, found from its `#include` lines (no compiler needed), and their
stamps for cache keys."""

from __future__ import annotations

import os

from ..source import find_includes
from .files import MAX_FILE_BYTES


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
