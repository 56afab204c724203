"""Who includes whom, so that a change to a header re-checks every file that reads it.

The graph keeps each file's direct `#include` edges (resolved the way the compiler resolves them:
the includer's folder for quoted includes, then the include folders) and answers the reverse,
transitive question: which files read this header, directly or through other headers. Updating a
file re-reads only that file's includes, so the graph follows includes as they change; headers
reached for the first time are scanned too.

Includes that resolve to nothing (a header not written yet, or CUDA's own headers) are kept, indexed
by file name, so that creating the header later re-checks the files that were waiting for it.

Pure engine code: paths in, sets of paths out; reading never raises.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from .compile import resolve_include
from .files import MAX_FILE_BYTES, read_text_prefix
from .source import find_includes

Reader = Callable[[str], "str | None"]


def read_text(path: str) -> str | None:
    """The file's text for include scanning, or None when it cannot be read (a FIFO named
    `x.cuh` is not opened for reading: that would block)."""
    return read_text_prefix(path, MAX_FILE_BYTES)


def normalize(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


class IncludeGraph:
    def __init__(self, include_dirs: Iterable[str] = (), read: Reader = read_text) -> None:
        self.include_dirs: tuple[str, ...] = tuple(include_dirs)
        self._read = read
        self._includes: dict[str, set[str]] = {}  # file -> headers it includes directly
        self._includers: dict[str, set[str]] = {}  # header -> files that include it directly
        # file name -> {(includer, target, quoted)} for includes that resolved to nothing
        self._unresolved: dict[str, set[tuple[str, str, bool]]] = {}
        self._unresolved_of: dict[str, set[tuple[str, str, bool]]] = {}

    # --- queries ------------------------------------------------------------------------------

    def __contains__(self, path: str) -> bool:
        return normalize(path) in self._includes

    def __len__(self) -> int:
        return len(self._includes)

    def files(self) -> set[str]:
        """Every file the graph has scanned (sources and the headers they reach)."""
        return set(self._includes)

    def includes(self, path: str) -> set[str]:
        return set(self._includes.get(normalize(path), ()))

    def includers(self, path: str) -> set[str]:
        return set(self._includers.get(normalize(path), ()))

    def dependents(self, path: str) -> set[str]:
        """Every file that reads `path` directly or through other headers (cycles are fine)."""
        start = normalize(path)
        seen: set[str] = set()
        stack = list(self._includers.get(start, ()))
        while stack:
            f = stack.pop()
            if f in seen or f == start:
                continue
            seen.add(f)
            stack.extend(self._includers.get(f, ()))
        return seen

    def waiting_for(self, path: str) -> set[str]:
        """Files with an include that resolved to nothing and would resolve to `path` (once it
        exists: the header appeared, or is about to)."""
        target_path = normalize(path)
        out = set()
        for includer, target, quoted in self._unresolved.get(os.path.basename(target_path), ()):
            search = ([os.path.dirname(includer)] if quoted else []) + list(self.include_dirs)
            if any(normalize(os.path.join(d, target)) == target_path for d in search):
                out.add(includer)
        return out

    def files_under(self, folder: str) -> set[str]:
        prefix = normalize(folder) + os.sep
        return {f for f in self._includes if f.startswith(prefix)}

    # --- updates ------------------------------------------------------------------------------

    def update(self, path: str, text: str | None = None) -> bool:
        """Re-read `path`'s includes (from `text` when given, else through the reader) and scan
        headers it reaches that the graph has not seen yet. True when its direct edges changed."""
        path = normalize(path)
        changed = self._set_edges(path, text)
        stack = [h for h in self._includes.get(path, ()) if h not in self._includes]
        while stack:
            header = stack.pop()
            if header in self._includes:
                continue
            self._set_edges(header, None)
            stack.extend(h for h in self._includes[header] if h not in self._includes)
        return changed

    def remove(self, path: str) -> None:
        """The file is gone: drop its own edges. Files that include it keep their edge until they
        are re-scanned, so `dependents` still finds them for the re-check that reports the loss."""
        path = normalize(path)
        for header in self._includes.pop(path, set()):
            self._drop_includer(header, path)
        self._drop_unresolved(path)

    def _set_edges(self, path: str, text: str | None) -> bool:
        if text is None:
            text = self._read(path)
        base = os.path.dirname(path)
        resolved: set[str] = set()
        unresolved: set[tuple[str, str, bool]] = set()
        for inc in find_includes(text or ""):
            r = resolve_include(inc.target, inc.quoted, base, self.include_dirs)
            if r:
                resolved.add(normalize(r))
            else:
                unresolved.add((path, inc.target, inc.quoted))
        resolved.discard(path)  # a file that includes itself adds nothing
        old = self._includes.get(path)
        self._includes[path] = resolved
        for header in (old or set()) - resolved:
            self._drop_includer(header, path)
        for header in resolved:
            self._includers.setdefault(header, set()).add(path)
        self._drop_unresolved(path)
        if unresolved:
            self._unresolved_of[path] = unresolved
            for entry in unresolved:
                self._unresolved.setdefault(os.path.basename(entry[1]), set()).add(entry)
        return old != resolved

    def _drop_includer(self, header: str, includer: str) -> None:
        users = self._includers.get(header)
        if users is not None:
            users.discard(includer)
            if not users:
                del self._includers[header]

    def _drop_unresolved(self, path: str) -> None:
        for entry in self._unresolved_of.pop(path, set()):
            name = os.path.basename(entry[1])
            bucket = self._unresolved.get(name)
            if bucket is not None:
                bucket.discard(entry)
                if not bucket:
                    del self._unresolved[name]
