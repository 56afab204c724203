"""Reading CUDA files: text that cannot be read (binary, too large, gone) is a Diagnostic."""

from __future__ import annotations

import os

from ..model import Diagnostic, Severity

MAX_FILE_BYTES = 2 * 1024 * 1024


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
