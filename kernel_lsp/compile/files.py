"""Reading CUDA files: text that cannot be read (binary, too large, gone) is a Diagnostic."""

from __future__ import annotations

import codecs
import os

from ..model import Diagnostic, Severity

MAX_FILE_BYTES = 2 * 1024 * 1024
UTF8_BOM = "\ufeff"

# One "?" per byte that is not UTF-8: a Latin-1 `é` in a comment stays one column wide, so the
# compiler's columns after it still match the line the user sees.
codecs.register_error("kernel-lsp-byte", lambda e: ("?" * (e.end - e.start), e.end))


def format_size(n: int) -> str:
    """Binary units, as the limit is set in (2097152 bytes is 2.0 MiB, not "2.1 MB")."""
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 2**20:.1f} MiB"


def _not_checked(path: str, message: str, severity: Severity = Severity.ERROR) -> Diagnostic:
    return Diagnostic(path, 1, 1, severity, message, code="not-checked", source="kernel-lsp")


def _too_large(path: str, size: int, max_bytes: int) -> Diagnostic:
    return _not_checked(
        path,
        f"not checked: the file is {format_size(size)}, over the {format_size(max_bytes)} limit "
        "(--max-file-bytes, kernelLsp.maxFileBytes)",
    )


def read_source(path: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[str | None, Diagnostic | None]:
    """The file's text (and a note when it needed repair), or None and the Diagnostic that says
    why it is not checked. Binary and oversized files are errors wherever they are read: a file
    that is never compiled must not pass a check."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            return None, _too_large(path, size, max_bytes)
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None, _not_checked(path, "not checked: the file no longer exists", Severity.WARNING)
    except OSError as e:
        return None, _not_checked(path, f"not checked: cannot read the file ({e.strerror})")
    return decode_source(data, path, max_bytes)


def decode_source(
    data: bytes, path: str, max_bytes: int = MAX_FILE_BYTES
) -> tuple[str | None, Diagnostic | None]:
    """Like read_source, for bytes in hand. Text that is not UTF-8 is still checked: each byte
    that does not decode becomes "?" (columns kept) and an information diagnostic says so. A
    UTF-8 byte-order mark is dropped: editors do not show it, so columns stay the user's."""
    if len(data) > max_bytes:
        return None, _too_large(path, len(data), max_bytes)
    if b"\x00" in data[:8192]:
        return None, _not_checked(path, "not checked: this looks like a binary file (it contains NUL bytes)")
    try:
        text, note = data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        text = data.decode("utf-8", errors="kernel-lsp-byte")
        note = Diagnostic(
            path,
            line,
            e.start - data.rfind(b"\n", 0, e.start),  # 1-based column of the byte
            Severity.INFO,
            f"the file is not UTF-8 (byte 0x{data[e.start]:02x} at line {line}); it was checked with "
            "each such byte read as `?`; save it as UTF-8",
            code="not-utf8",
            source="kernel-lsp",
        )
    return text.removeprefix(UTF8_BOM), note
