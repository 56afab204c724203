"""The project's own headers a file includes with quotes, for the constants its launches read
(`<<<grid, kBlock>>>` with `constexpr int kBlock = 256;` in `"config.cuh"`).

A quoted `#include` is looked up as the compilers do: beside the including file, then in the
include folders of the file's compile options; the headers those include with quotes are followed
too. Angle-bracket includes are left out: they name libraries (CUDA's, CUTLASS, the standard
library), whose constants set no launch of the file's. Each header is read through the engine's
safe reader (a regular file only, never a FIFO or a device, at most `MAX_HEADER_TEXT` bytes),
and at most `MAX_HEADERS` of them, so a header that includes itself or a huge tree costs little.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from ..compile.files import MAX_FILE_BYTES, read_text_prefix
from ..compile.includes import resolve_include
from ..constants import Constants, read_constants
from ..source import find_includes

MAX_HEADERS = 64
MAX_HEADER_TEXT = MAX_FILE_BYTES

# (path, mtime_ns, size): a header as read; a key that changes when it is edited on disk.
HeaderStamp = tuple[str, int, int]


def quoted_headers(source: str, path: str, include_dirs: Sequence[str] = ()) -> tuple[HeaderStamp, ...]:
    """The headers `source` (the text of `path`) includes with quotes, directly or through one
    another, in the order the preprocessor first reads them; each with its stamp."""
    found: dict[str, HeaderStamp] = {}
    dirs = tuple(include_dirs)

    def visit(text: str, folder: str) -> None:
        for inc in find_includes(text):
            if len(found) >= MAX_HEADERS:
                return
            if not inc.quoted:
                continue
            header = resolve_include(inc.target, True, folder, dirs)
            if header is None or header in found or os.path.abspath(header) == os.path.abspath(path):
                continue
            try:
                st = os.stat(header)
            except OSError:
                continue
            found[header] = (header, st.st_mtime_ns, st.st_size)
            visit(_text(header, st.st_mtime_ns, st.st_size) or "", os.path.dirname(header))

    visit(source, os.path.dirname(os.path.abspath(path)))
    return tuple(found.values())


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
