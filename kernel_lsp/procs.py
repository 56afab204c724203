"""Process hygiene for every process kernel-lsp starts: children die with their parent, stay
inside a memory limit, and take what they started with them. One module, used by every spawner
(compile workers, nvcc, the GPU worker).

- A worker (`become_worker`) leads its own process group, so whatever a spec starts (`sleep 300`)
  is in it and ends with it. The kernel sends it SIGTERM when the thread that started it ends
  (Linux's PR_SET_PDEATHSIG); the handler kills the whole group. A thread that polls
  `os.getppid()` does the same where the signal never comes (not Linux, a parent that died
  before the signal was armed, or a worker started from a short-lived thread, which asks for no
  signal: the GPU worker).
- A tool a worker runs in a session of its own (nvcc, killed with its children at a deadline)
  gets PR_SET_PDEATHSIG=SIGKILL (`tool_preexec`) and is registered (`tracked_group`), so the
  worker's end kills that group too.
- A tool run from a long-lived process (ncu, compute-sanitizer from the server's GPU backend) goes
  through `ToolRuns`: in a session of its own, so that closing its owner kills it and the launch
  it watches at once instead of waiting out a profile.
- Memory: RLIMIT_AS (no cgroups needed), set in the worker for each job (`limit_memory`) and
  inherited by the tools it runs; the GPU worker gets none (CUDA reserves far more address space
  than it uses).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

_PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 0.5

_groups: set[int] = set()  # process groups of tools this process runs (nvcc), ended with it
_groups_lock = threading.Lock()
_memory_limit = 0  # bytes; 0: none


def _find_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once, here: in a `preexec_fn` (between fork and exec, where another thread may hold a
# lock) the call is then one foreign function, no dlopen and no import.
_prctl = _find_prctl()


def release_memory(collect: bool = True) -> bool:
    """Give the heap's free pages back to the system: a collection, then glibc's malloc_trim (a
    compile worker between jobs keeps what a large check freed otherwise). Whether the
    trim ran (glibc only)."""
    import gc

    if collect:  # not in the server: a collection there holds the GIL, the loop waits
        gc.collect()
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl)
        return False
    trim(0)
    return True


def env_flag(name: str) -> bool:
    """Whether the environment switches `name` on: set, and neither empty nor "0"."""
    return os.environ.get(name, "") not in ("", "0")


def memory_available() -> int:
    """The host's available memory in bytes (MemAvailable), 0 where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when the thread that started it ends.
    False where there is no prctl (not Linux)."""
    return _prctl is not None and _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


# Only the system's own setpriv: a PATH lookup could find one in the folder the server runs in
# (an editor starts it in the workspace, and a PATH with "." or an empty entry looks there).
SETPRIV_PATHS = ("/usr/bin/setpriv", "/bin/setpriv")


@functools.cache
def _setpriv_with_pdeathsig() -> str | None:
    """The system's setpriv where it takes --pdeathsig (util-linux 2.33 and later), else None.
    Asked through its --help: the probe runs nothing else."""
    for path in SETPRIV_PATHS:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        try:
            usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return path if "--pdeathsig" in usage.stdout else None
    return None


def command_dying_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so that the kernel kills it (SIGKILL) when the thread that starts it ends, for
    a child started where `preexec_fn` is unsafe (a process with threads, asyncio's
    subprocesses): through `setpriv --pdeathsig`, which sets it and execs `argv` (same pid).
    `argv` unchanged where there is no such setpriv. (`die_with_parent` is the same for the
    calling process itself.)"""
    setpriv = _setpriv_with_pdeathsig()
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


def end_process_group(code: int = 1) -> None:
    """Kill the tools this process runs, then its own process group (itself included when it
    leads it; else it exits with `code`). Used when the parent is gone, asks this worker to end,
    or the worker is done: what its jobs started (a spec's `sleep 300`) ends with it.

    Runs in a signal handler, which a second SIGTERM (the kernel's for the parent's death, the
    pool's own) can start again inside this very function: it takes no lock. A worker whose
    first handler held `_groups_lock` when the second came waited for itself forever, holding
    the server's stdout, so the editor (and CI) waited for the server's end forever too. The
    copy is one C call under the GIL; a tool registered at this moment is killed with the
    process group anyway."""
    try:
        groups = list(_groups)
    except RuntimeError:  # changed while copied
        groups = []
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if os.getpgid(0) == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(0, signal.SIGKILL)
    os._exit(code)


def _on_term(signum, frame) -> None:
    end_process_group()


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            end_process_group()


def become_worker(die_with_thread: bool = True) -> None:
    """Set up a long-lived worker process (call first thing in it, from its main thread): its own
    process group, SIGTERM (on request, or from the kernel when the parent dies) ends the group,
    and a thread watches for the parent's end in case the signal never comes.
    `die_with_thread`: the kernel's signal comes when the *thread* that started this process
    ends, so only a parent that starts its workers from a thread that lives as long as they
    should (the WorkerPool's own thread) asks for it; the others rely on the watching thread."""
    parent = os.getppid()
    with contextlib.suppress(OSError):
        if os.getpgid(0) != os.getpid():
            os.setpgid(0, 0)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_term)
    if die_with_thread:
        die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the signal was armed
        end_process_group()
    threading.Thread(
        target=_watch_parent, args=(parent,), name="kernel-lsp-parent-watch", daemon=True
    ).start()


def kill_group(pid: int) -> None:
    """Kill a worker started by this process and everything in its process group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # not a group leader yet (it had just started), or already gone
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (Linux's /proc/PID/task/TID/children; just `pid` where
    that is not readable): a process that bubblewrap runs in a session and PID namespace of its
    own is not in bubblewrap's process group, but it is its descendant."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
    return out


def signal_all(pids: list[int], sig: int) -> None:
    """`sig` to each of `pids` that still exists."""
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, sig)


def stop_all(pids: list[int], timeout_s: float = 1.0) -> bool:
    """SIGSTOP to each of `pids`, returning once every one has stopped (or ended): a signal is
    delivered when the kernel next schedules its target, not when it is sent. False when one
    still ran after `timeout_s`."""
    signal_all(pids, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    waiting = list(pids)
    while waiting:
        waiting = [p for p in waiting if process_state(p) not in ("T", "t", "Z", "X", "")]
        if not waiting:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0001)
    return True


def process_state(pid: int) -> str:
    """The one-letter state /proc gives `pid` ("" when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def tool_preexec() -> Callable[[], None]:
    """`preexec_fn` for a tool run in its own session (`start_new_session=True`): it dies with
    the process that runs it. Its own children are ended through `tracked_group`. It only calls
    prctl (resolved beforehand): safe between fork and exec in a worker with threads."""
    return _kill_me_with_parent


def _kill_me_with_parent() -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL


@contextlib.contextmanager
def tracked_group(pgid: int) -> Iterator[None]:
    """While the block runs, the process group `pgid` ends with this worker."""
    track_group(pgid)
    try:
        yield
    finally:
        untrack_group(pgid)


def track_group(pgid: int) -> None:
    """The process group `pgid` ends with this worker (`end_process_group`), until untracked."""
    with _groups_lock:
        _groups.add(pgid)


def untrack_group(pgid: int) -> None:
    with _groups_lock:
        _groups.discard(pgid)


def limit_memory(max_bytes: int) -> None:
    """This process's address-space limit (RLIMIT_AS), inherited by what it starts; 0 lifts it
    back to the hard limit. A limit below what is already mapped only stops new mappings."""
    global _memory_limit
    try:
        import resource
    except ImportError:  # not POSIX
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = max_bytes if max_bytes > 0 else hard
    if hard != resource.RLIM_INFINITY and soft > hard:
        soft = hard
    try:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        _memory_limit = max(0, max_bytes)
    except (ValueError, OSError):
        pass


def memory_limit() -> int:
    """The limit `limit_memory` set in this process (bytes; 0: none)."""
    return _memory_limit


TOOL_POLL_S = 0.2  # how often a running tool's owner is checked for `end_all`
OWNER_CLOSED = "its owner was closed"  # the OSError of a run that `end_all` refused or ended


class ToolRuns:
    """The tool processes (ncu, compute-sanitizer) one owner runs, each the leader of a session of
    its own with whatever it starts (the profiled launch). `end_all` kills them all, and refuses
    new ones from then on: closing a GPU backend must not wait out a 20 s profile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[int] = set()
        self.ended = False

    def run(self, cmd: list[str], timeout_s: float, env: dict[str, str] | None = None) -> tuple[int, str]:
        """(exit code, stdout + stderr). Raises subprocess.TimeoutExpired (the tool's group
        killed) and OSError (also when the owner has ended its runs)."""
        with self._lock:
            if self.ended:
                raise OSError(OWNER_CLOSED)
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                start_new_session=True,
                preexec_fn=tool_preexec(),
            )
            self._running.add(proc.pid)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:  # in short waits, so that `end_all` is seen even if the pipes stay open
                    out, err = proc.communicate(
                        timeout=min(TOOL_POLL_S, max(0.0, deadline - time.monotonic()))
                    )
                    break
                except subprocess.TimeoutExpired:
                    if not self.ended and time.monotonic() < deadline:
                        continue
                    kill_group(proc.pid)
                    # A child that left the group could hold the pipes open: do not wait for it.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.communicate(timeout=5)
                    if self.ended:
                        raise OSError(OWNER_CLOSED) from None
                    raise subprocess.TimeoutExpired(cmd, timeout_s) from None
        finally:
            with self._lock:
                self._running.discard(proc.pid)
        if self.ended and proc.returncode < 0:  # killed by end_all: the same answer as above
            raise OSError(OWNER_CLOSED)
        return proc.returncode, out + ("\n" + err if err.strip() else "")

    def end_all(self) -> None:
        with self._lock:
            self.ended = True
            running = list(self._running)
        for pid in running:
            kill_group(pid)
