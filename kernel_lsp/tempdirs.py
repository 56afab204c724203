"""kernel-lsp's temporary folders (nvcc's, the compile pool's, the GPU worker's, each accused
process's, the sanitizer's and ncu's): each holds an owner file naming the process that made it,
so that a folder a killed process left behind is found and removed later.

- `make(prefix)`: a private folder (mkdtemp, mode 0700) with `OWNER_FILE` in it: the owner's
  pid, its start time (so a pid reused by another process is not taken for it) and its pid
  namespace (a pid of another namespace says nothing here).
- `temporary(prefix)`: `make`, removed when the block ends (also on an exception).
- `reap()`: removes the folders in the temporary folder whose owner is gone: only directories
  (not links) of this user named `kernel-lsp-...` that hold an owner file naming a dead process
  of this pid namespace. A folder without an owner file (another tool's, an older kernel-lsp's)
  or whose owner cannot be told is left alone. `reap(owner=pid)` only those of that process
  (a parent that has just killed its worker). The first `make` of a process reaps once.

Never raises on the filesystem's account: a folder that cannot be read or removed is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator

PREFIX = "kernel-lsp-"
OWNER_FILE = ".kernel-lsp-owner"

_reaped = False
_reap_lock = threading.Lock()


def _start_time(pid: int) -> str | None:
    """The process's start time since boot (/proc/PID/stat, field 22), None when it is gone or
    the system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: read after its end.
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _owner_line(pid: int) -> str:
    return f"{pid} {_start_time(pid) or '-'} {_pid_namespace() or '-'}\n"


def make(prefix: str) -> str:
    """A new private folder in the temporary folder, named `prefix...`, owned by this process."""
    assert prefix.startswith(PREFIX), prefix
    reap_once()
    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        fd = os.open(os.path.join(folder, OWNER_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_owner_line(os.getpid()))
    except OSError:  # a full disk: the folder works, it is only not reaped after a kill
        pass
    return folder


@contextlib.contextmanager
def temporary(prefix: str) -> Iterator[str]:
    """`make(prefix)`, removed when the block ends."""
    folder = make(prefix)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _owner(folder: str) -> tuple[int, str, str] | None:
    """(pid, start time, pid namespace) of the folder's owner file; None when it has none that
    reads as one (not a regular file, too large, another format)."""
    try:
        fd = os.open(os.path.join(folder, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        words = f.read(200).decode("ascii", "replace").split()
    if len(words) != 3 or not words[0].isdigit():
        return None
    return int(words[0]), words[1], words[2]


def _gone(pid: int, started: str, namespace: str) -> bool:
    """Whether the owner is known to be gone: its namespace is ours, and no process of its pid
    runs, or the one that does started at another time."""
    if namespace == "-" or namespace != (_pid_namespace() or "-"):
        return False
    now = _start_time(pid)
    if now is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False  # alive, and its start time cannot be read
    return started != "-" and now != started


def reap(owner: int | None = None, parent: str | None = None) -> int:
    """Remove the folders of owners that are gone (only `owner`'s, when given); how many."""
    parent = parent or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return 0
    removed = 0
    uid = os.getuid()
    for name in names:
        folder = os.path.join(parent, name)
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            continue
        found = _owner(folder)
        if found is None or (owner is not None and found[0] != owner) or not _gone(*found):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += not os.path.lexists(folder)
    return removed


def reap_once() -> None:
    """`reap()` once per process (the first `make`)."""
    global _reaped
    with _reap_lock:
        if _reaped:
            return
        _reaped = True
    with contextlib.suppress(Exception):  # best effort: never in the way of the work
        reap()
