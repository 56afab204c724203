"""The project's own headers a file includes, for the constants its launches read
(`<<<grid, kBlock>>>` with `constexpr int kBlock = 256;` in `"config.cuh"` or `<tk/config.cuh>`).

A quoted `#include` is looked up as the compilers do: beside the including file, then in the
include folders of the file's compile options (the project's `-I` folders from
compile_commands.json); an angle-bracket one in those folders only, so `<cstdio>` and
`<cuda_runtime.h>` (found in the compiler's own folders) are never read. A header found in a
library tree (the CUDA toolkit, a Python environment's `site-packages`, `/usr/include`) is left
out even when an `-I` names it: its constants set no launch of the file's. The headers those
include are followed too. Each header is read through the engine's safe reader (a regular file
only, never a FIFO or a device, at most `MAX_HEADER_TEXT` bytes), and at most `MAX_HEADERS` of
them, so a header that includes itself or a huge tree costs little.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from ..compile.includes import resolve_include
from ..constants import Constants, read_constants
from ..files import MAX_FILE_BYTES, read_text_prefix
from ..source import find_includes

MAX_HEADERS = 64
MAX_HEADER_TEXT = MAX_FILE_BYTES

# (path, mtime_ns, size): a header as read; a key that changes when it is edited on disk.
HeaderStamp = tuple[str, int, int]


def quoted_headers(source: str, path: str, include_dirs: Sequence[str] = ()) -> tuple[HeaderStamp, ...]:
    """The project headers `source` (the text of `path`) includes (with quotes, or with angle
    brackets from `include_dirs`), directly or through one another, in the order the preprocessor
    first reads them; each with its stamp."""
    found: dict[str, HeaderStamp] = {}
    dirs = tuple(include_dirs)

    def visit(text: str, folder: str) -> None:
        for inc in find_includes(text):
            if len(found) >= MAX_HEADERS:
                return
            header = resolve_include(inc.target, inc.quoted, folder, dirs)
            if header is None or header in found or os.path.abspath(header) == os.path.abspath(path):
                continue
            if _in_library(header):
                continue
            try:
                st = os.stat(header)
            except OSError:
                continue
            found[header] = (header, st.st_mtime_ns, st.st_size)
            visit(_text(header, st.st_mtime_ns, st.st_size) or "", os.path.dirname(header))

    visit(source, os.path.dirname(os.path.abspath(path)))
    return tuple(found.values())


project_headers = quoted_headers  # the better name: angle-bracket project headers count too


_LIBRARY_PARTS = frozenset({"site-packages", "dist-packages"})
_LIBRARY_ROOTS = ("/usr/include/", "/usr/local/include/", "/usr/local/cuda", "/opt/nvidia/")


def _in_library(header: str) -> bool:
    """A header of a library tree (CUDA's, a Python environment's, the system's), not the project's."""
    full = os.path.abspath(header)
    parts = full.split(os.sep)
    if _LIBRARY_PARTS.intersection(parts) or full.startswith(_LIBRARY_ROOTS):
        return True
    # A CUDA toolkit elsewhere (`/opt/cuda-12.4/targets/x86_64-linux/include/...`).
    return "targets" in parts and any(p.startswith("cuda") for p in parts)


@functools.lru_cache(maxsize=256)
def _text(header: str, mtime_ns: int, size: int) -> str | None:
    """A header's text, read once per version (a regular file only; a prefix of a huge one)."""
    return read_text_prefix(header, MAX_HEADER_TEXT)


def with_headers(
    constants: Constants, headers: Sequence[HeaderStamp], defines: Sequence[str] = ()
) -> Constants:
    """`constants` (a file's) with its headers' constants behind them: a name the file does not
    define is looked up in its headers, in include order, with the file's -D values. They are
    read at the first such name: a file whose launches need none costs nothing more."""
    if not headers:
        return constants
    stamps, flags = tuple(headers), tuple(defines)

    def load() -> list[Constants]:
        out = []
        for header, mtime_ns, size in stamps:
            text = _text(header, mtime_ns, size)
            if text is None:  # gone, a FIFO, a device: nothing to read
                continue
            # A fresh reading per file: a header's values may depend on the file's other headers.
            theirs = read_constants(text, flags)
            theirs.origin, theirs.context = header, constants
            out.append(theirs)
        return out

    constants.loader = load
    return constants
