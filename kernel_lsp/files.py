"""Reading a user's file safely, for the engine and the front ends alike: a regular file only,
under a size limit, opened without blocking (a FIFO or a device is a FileProblem, never a hang).
A source that cannot be read (binary, too large, gone) is a Diagnostic. Core: standard library
and model.py only."""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable

from .model import Diagnostic, Severity

MAX_FILE_BYTES = 2 * 1024 * 1024
# A header the compiler would read: larger ones (a 2 GiB sparse file) are not handed to it.
MAX_HEADER_BYTES = 64 * 1024 * 1024
# A NUL in the first block means a binary file; one further on is reported at its line.
BINARY_PROBE_BYTES = 8192
UTF8_BOM = "\ufeff"
CUDA_SUFFIXES = (".cu", ".cuh")  # the files kernel-lsp checks
SPEC_SUFFIX = ".spec.py"  # `vadd.spec.py` beside `vadd.cu`: what its kernels must compute


def is_cuda(path: str) -> bool:
    """A file kernel-lsp checks (by its name)."""
    return path.endswith(CUDA_SUFFIXES)


# Folders a walk for CUDA files never enters (nor any whose name starts with a dot).
SKIPPED_DIRS = frozenset({"node_modules", "build", "__pycache__", "dist", ".git"})


# One "?" per byte that is not UTF-8: a Latin-1 `é` in a comment stays one column wide, so the
# compiler's columns after it still match the line the user sees.
def _question_marks(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeDecodeError | UnicodeEncodeError | UnicodeTranslateError):
        raise e
    return "?" * (e.end - e.start), e.end


codecs.register_error("kernel-lsp-byte", _question_marks)


def format_size(n: int | float) -> str:
    """Binary units, as the limit is set in (2097152 bytes is 2.0 MiB, not "2.1 MB")."""
    if n < 1024:
        return f"{n} bytes"
    if n < 2**20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


class FileProblem(OSError):
    """A file that is not read: not a regular file (a FIFO, a device) or over its size limit.
    `reason` completes "<path> is ...": "a FIFO (named pipe), not a regular file"."""

    def __init__(self, path: str, reason: str, size: int | None = None) -> None:
        super().__init__(0, reason, path)
        self.reason = reason
        self.size = size  # set when the file is too large

    def __str__(self) -> str:
        return f"{self.filename} is {self.reason}"


def regular_file_problem(path: str, st: os.stat_result, max_bytes: float) -> FileProblem | None:
    """Why a file with this stat is not read ("a FIFO ..., not a regular file", "2.0 GiB, over
    the 64.0 MiB limit"), or None."""
    if not stat.S_ISREG(st.st_mode):
        return FileProblem(path, f"{file_kind(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        return FileProblem(
            path, f"{format_size(st.st_size)}, over the {format_size(max_bytes)} limit", st.st_size
        )
    return None


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def read_regular(
    path: str,
    max_bytes: int,
    prefix: bool = False,
    follow_links: bool = True,
    inspect: Callable[[os.stat_result], None] | None = None,
) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (with `prefix`, its first `max_bytes`
    whatever its size). Opened without blocking and checked on the open descriptor (fstat), so a
    FIFO or a device never blocks or streams forever, and a file that grows while it is read
    stops at the limit. Without `follow_links`, a link is not opened (ELOOP); `inspect` sees the
    open file's stat before a byte is read and may raise (whose file it is, its mode). Raises
    FileProblem, or OSError."""
    fd = os.open(path, _OPEN_FLAGS | (0 if follow_links else os.O_NOFOLLOW))
    try:  # before a file object wraps it: a folder's descriptor is refused by its stat, too
        st = os.fstat(fd)
        problem = regular_file_problem(path, st, max_bytes if not prefix else float("inf"))
        if problem:
            raise problem
        if inspect is not None:
            inspect(st)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb", closefd=True) as f:
        data = f.read(max_bytes + (not prefix))
    if len(data) > max_bytes:  # it grew while read
        raise FileProblem(path, f"over the {format_size(max_bytes)} limit", len(data))
    return data


def read_text_file(path: str, max_bytes: int = MAX_FILE_BYTES, errors: str = "strict") -> str:
    """A regular file's text (UTF-8; `errors` as for bytes.decode) for the engine's reads of
    user files (specs, sources): FileProblem for a FIFO, a device or a file over `max_bytes`,
    OSError, UnicodeDecodeError with errors="strict"."""
    return read_regular(path, max_bytes).decode("utf-8", errors)


def read_text_prefix(path: str, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """The first `max_bytes` of a regular file as text (undecodable bytes replaced), for
    scanning its #include lines; None when it cannot be read or is not a regular file."""
    try:
        return read_regular(path, max_bytes, prefix=True).decode("utf-8", "replace")
    except OSError:
        return None


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
        data = read_regular(path, max_bytes)
    except FileProblem as e:
        if e.size is not None:
            return None, _too_large(path, e.size, max_bytes)
        return None, _not_checked(path, f"not checked: the file is {e.reason}")
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
    nul = data.find(b"\x00")
    if 0 <= nul < BINARY_PROBE_BYTES:
        return None, _not_checked(path, "not checked: this looks like a binary file (it contains NUL bytes)")
    if nul >= 0:
        # The compilers read the text up to its first NUL: the rest would pass unseen.
        line = data.count(b"\n", 0, nul) + 1
        col = nul - data.rfind(b"\n", 0, nul)
        message = f"not checked: a NUL byte at line {line}, column {col}; the compilers stop reading there"
        return None, Diagnostic(
            path, line, col, Severity.ERROR, message, code="not-checked", source="kernel-lsp"
        )
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


def spec_owners(spec_path: str) -> list[str]:
    """`dir/vadd.spec.py` -> the kernel files it checks (`dir/vadd.cu`, `dir/vadd.cuh`) that exist."""
    stem = spec_path[: -len(SPEC_SUFFIX)]
    return [stem + s for s in CUDA_SUFFIXES if os.path.isfile(stem + s)]


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file, as written (relative ones from the current folder)."""
    return os.path.abspath(a) == os.path.abspath(b)
