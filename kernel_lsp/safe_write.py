"""Writing kernel-lsp's own files inside a workspace without following the workspace's symlinks.

A repository can ship `.kernel-lsp` (or `.kernel-lsp/reports`, or `k.spec.py`) as a symlink to
anywhere the user can write (`~/.bashrc`, `~/.ssh`): a report, a backup or a spec skeleton written
through it would land there. So every folder below the workspace root is created or entered
without following a symlink (`O_NOFOLLOW`, relative to the folder above: a link swapped in
between is not followed either), and files are created exclusively and without following one.
The workspace root itself is the user's choice and may be a link."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_AT_FDS = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd


class UnsafeWrite(OSError):
    """A path kernel-lsp will not write through; the message says which and why."""


def _refuse(path: str, why: str) -> UnsafeWrite:
    return UnsafeWrite(
        f"{path} {why}: kernel-lsp does not write through it (a link shipped in a repository could point anywhere)"
    )


@contextlib.contextmanager
def _folder_fd(root: str, parts: Sequence[str]) -> Iterator[int | str]:
    """The folder root/parts... (made when missing), entered without following a link: a file
    descriptor where the platform opens relative to one, else the checked path."""
    root = os.path.realpath(root)
    if not _AT_FDS:  # checked by path: no link on the way, and the real folder is under the root
        d = root
        for part in parts:
            d = os.path.join(d, part)
            with contextlib.suppress(FileExistsError):
                os.mkdir(d)
            if stat.S_ISLNK(os.lstat(d).st_mode):
                raise _refuse(d, "is a symbolic link")
        if os.path.commonpath([os.path.realpath(d), root]) != root:
            raise _refuse(d, "leaves the workspace")
        yield d
        return
    fd = os.open(root, os.O_RDONLY | _DIRECTORY)
    try:
        where = root
        for part in parts:
            where = os.path.join(where, part)
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    kind = "is a symbolic link" if os.path.islink(where) else "is not a folder"
                    raise _refuse(where, kind) from None
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def create_in_workspace(
    workspace: str, folder: Sequence[str], names: Sequence[str], binary: bool = False
) -> tuple[str, IO[Any]]:
    """Create the first of `names` that does not exist yet in workspace/folder... (made as
    needed), exclusively and without following links; (its path, the file open for writing)."""
    with _folder_fd(workspace, folder) as where:
        for name in names:
            path = os.path.join(os.path.abspath(workspace), *folder, name)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
            try:
                if isinstance(where, int):
                    fd = os.open(name, flags, 0o644, dir_fd=where)
                else:
                    fd = os.open(os.path.join(where, name), flags, 0o644)
            except FileExistsError:
                continue
            if binary:
                return path, os.fdopen(fd, "wb")
            return path, os.fdopen(fd, "w", encoding="utf-8", newline="")
    raise FileExistsError(errno.EEXIST, "every name is taken", os.path.join(workspace, *folder))


def inside(path: str, root: str) -> bool:
    """Whether `path`, its links resolved, lies in `root` (resolved too)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, top]) == top


def replace_file(path: str, text: str, overwrite: bool = True) -> None:
    """Write `text` to `path` whole: into a new temporary file beside it, then renamed over it
    (`overwrite`) or linked into place (not overwriting: FileExistsError when it exists). Neither
    follows a link at `path`, and a link there is refused rather than replaced."""
    if os.path.islink(path):
        raise _refuse(path, "is a symbolic link")
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".kernel-lsp-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if overwrite:
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
