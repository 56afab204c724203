"""Which confinement lets CUDA work: each part of the sandbox (kernel_lsp/fence/sandbox.py) alone
and together, in a fresh child, then what the accused process does on a GPU. Run on a GPU machine:

    PYTHONPATH=. python benchmarks/sandbox_cuda_matrix.py [--only NAME ...]

Each child enters its configuration first thing, then, through libcuda itself (ctypes, no
cuda-python needed): cuInit, a context, cuMemAlloc, cuMemAllocHost (pinned memory), a tiny PTX
kernel launched and its output read back; then `limit_memory` where the configuration has a
report, and another allocation and launch under the limit; then a memfd the parent sends over an
AF_UNIX SOCK_SEQPACKET socketpair (SCM_RIGHTS, as the accused receives its buffers) is mapped
MAP_SHARED, answered, registered with cuMemHostRegister and copied to the GPU. One row per
configuration: each step "ok" or the first error, then the protections the sandbox reported. The
memfd is mapped before CUDA starts, so that row part means something on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MEMFD_BYTES = 1 << 20
MARKER, ANSWER = b"from-parent", b"answered"

CHILD = r"""
import ctypes, json, mmap, os, socket, sys
MEMFD_BYTES = 1 << 20
MARKER, ANSWER = b"from-parent", b"answered"
config, folder, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
from kernel_lsp.fence import sandbox as sb
from kernel_lsp.runner.one_launch import tool_libraries
out_early = {
    "threads at start": len(os.listdir("/proc/self/task")),
    "injected": {k: os.environ.get(k, "") for k in ("LD_PRELOAD", "CUDA_INJECTION64_PATH")},
}
try:
    import pyseccomp  # finds libseccomp by running ldconfig: before any confinement refuses exec
except Exception:
    pass

WIDE = ["/etc", "/dev", "/proc"]  # the broad reads the issue allowed: does narrowing them break CUDA?
CONFIGS = {
    "none": lambda: None,
    "landlock-writes-only": lambda: sb.restrict_files(folder, sb.READ_EVERYTHING),
    "landlock": lambda: sb.restrict_files(folder),
    "landlock-wide-reads": lambda: sb.restrict_files(folder, WIDE),
    "seccomp": lambda: sb.restrict_syscalls(),
    "seccomp-allow-shared-anon": lambda: sb.restrict_syscalls(deny_shared_anonymous=False),
    "seccomp-allow-unix": lambda: sb.restrict_syscalls(allow_unix_sockets=True),
    "landlock+seccomp": lambda: sb.restrict_files(folder)[0] + sb.restrict_syscalls(),
    "sandbox": lambda: sb.enter_sandbox(folder),
    "sandbox-allow-shared-anon": lambda: sb.enter_sandbox(folder, deny_shared_anonymous=False),
    "sandbox-allow-unix": lambda: sb.enter_sandbox(folder, allow_unix_sockets=True),
    "sandbox-wide-reads": lambda: sb.enter_sandbox(folder, readable=WIDE),
    # What the GPU worker and one_launch enter today (they run the user's spec too).
    "sandbox-legacy": lambda: sb.enter_sandbox(folder, readable=sb.READ_EVERYTHING, allow_unix_sockets=True),
    "bwrap": lambda: sb.enter_sandbox(folder, "bwrap"),
    # Issue 46: as the accused and the proof gate's launch enter it, closed after the context
    # (`close_after_start`): no socket, shared map, IPC or new thread from then on.
    "accused": lambda: sb.enter_sandbox(folder, cuda_start=True),
    "accused-bwrap": lambda: sb.enter_sandbox(folder, "bwrap", cuda_start=True),
    "gate": lambda: sb.enter_sandbox(
        folder, readable=tool_libraries(dict(os.environ)), allow_unix_sockets=True, cuda_start=True
    ),
    "gate-threads": lambda: sb.enter_sandbox(
        folder, readable=tool_libraries(dict(os.environ)), allow_unix_sockets=True, cuda_start=True
    ),
    "gate-bwrap": lambda: sb.enter_sandbox(
        folder, "bwrap", readable=tool_libraries(dict(os.environ)), allow_unix_sockets=True, cuda_start=True
    ),
}
CLOSED = {"accused": fd, "accused-bwrap": fd, "gate": None, "gate-threads": None, "gate-bwrap": None}


def sockets_now():  # this process's sockets: fd, family, type, its name and its peer's
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(name))
        except OSError:
            continue
        if (st.st_mode & 0o170000) != 0o140000:
            continue
        s = socket.socket(fileno=int(name))
        try:
            found.append([int(name), int(s.family), int(s.type), repr(s.getsockname()), repr(s.getpeername() if s.type != socket.SOCK_DGRAM else "")])
        except OSError as e:
            found.append([int(name), int(s.family), int(s.type), str(e)])
        finally:
            s.detach()
    return found
PTX = b'''
.version 7.0
.target sm_75
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 value)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [value];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    ret;
}
'''
out = {"config": config, "steps": {}, **out_early}


class Failed(Exception):
    pass


class Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def __call__(self, name, *args):
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        code = fn(*args)
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(code, ctypes.byref(text))
            raise Failed(f"{name}: {(text.value or b'').decode() or code}")


def step(name, fn):
    try:
        result = fn()
        out["steps"][name] = "ok"
        return result
    except Exception as e:
        out["steps"][name] = f"{type(e).__name__}: {e}"
        raise Failed(name) from None


def launch(cu, fn, value):
    dptr = ctypes.c_uint64()
    cu("cuMemAlloc_v2", ctypes.byref(dptr), ctypes.c_size_t(128))
    arg_out, arg_value = ctypes.c_uint64(dptr.value), ctypes.c_uint32(value)
    params = (ctypes.c_void_p * 2)(ctypes.addressof(arg_out), ctypes.addressof(arg_value))
    one = ctypes.c_uint(1)
    cu("cuLaunchKernel", fn, one, one, one, ctypes.c_uint(32), one, one, ctypes.c_uint(0), None, params, None)
    cu("cuCtxSynchronize")
    back = (ctypes.c_uint32 * 32)()
    cu("cuMemcpyDtoH_v2", back, ctypes.c_uint64(dptr.value), ctypes.c_size_t(128))
    if list(back) != [value] * 32:
        raise Failed(f"the kernel wrote {list(back)[:4]}..., not {value}")
    return dptr


def pinned(cu):
    host = ctypes.c_void_p()
    cu("cuMemAllocHost_v2", ctypes.byref(host), ctypes.c_size_t(1 << 20))
    ctypes.memset(host, 7, 1 << 20)
    cu("cuMemFreeHost", host)


def receive_memfd():
    with socket.socket(fileno=fd) as s:
        _msg, fds, _flags, _addr = socket.recv_fds(s, 64, 1)
    m = mmap.mmap(fds[0], MEMFD_BYTES, flags=mmap.MAP_SHARED)
    if m[: len(MARKER)] != MARKER:
        raise Failed(f"the memfd holds {m[:16]!r}")
    m[64 : 64 + len(ANSWER)] = ANSWER
    return m


def register(cu, m, dptr):
    ptr = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))
    cu("cuMemHostRegister_v2", ptr, ctypes.c_size_t(MEMFD_BYTES), ctypes.c_uint(0))
    cu("cuMemcpyHtoD_v2", ctypes.c_uint64(dptr.value), ptr, ctypes.c_size_t(128))
    cu("cuMemHostUnregister", ptr)


try:
    report = step("enter", CONFIGS[config.split(":")[-1]])
    if isinstance(report, sb.SandboxReport):
        out["protections"], out["tried"] = report.protections, report.tried
    elif isinstance(report, tuple) and report and isinstance(report[0], list):
        out["protections"], out["tried"] = report  # restrict_files: (applied, missing)
    elif isinstance(report, list):
        out["protections"] = report  # restrict_syscalls
    shared = step("memfd mapped", receive_memfd)
    cu = step("libcuda", Cuda)
    step("cuInit", lambda: cu("cuInit", ctypes.c_uint(0)))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    step("context", lambda: (cu("cuDeviceGet", ctypes.byref(dev), 0),
                             cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev), cu("cuCtxSetCurrent", ctx)))
    key = config.split(":")[-1]
    if key in CLOSED:
        out["sockets after the start"] = sockets_now()
        out["threads after the start"] = len(os.listdir("/proc/self/task"))
        out["/dev/zero open"] = [n for n in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{n}") == "/dev/zero"]
        step("close_after_start", lambda: sb.close_after_start(report, channel=CLOSED[key], new_threads=key == "gate-threads"))
    step("cuMemAlloc", lambda: cu("cuMemAlloc_v2", ctypes.byref(ctypes.c_uint64()), ctypes.c_size_t(1 << 20)))
    step("cuMemAllocHost", lambda: pinned(cu))
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    step("module", lambda: (cu("cuModuleLoadData", ctypes.byref(mod), ctypes.c_char_p(PTX)),
                            cu("cuModuleGetFunction", ctypes.byref(fn), mod, b"fill")))
    dptr = step("launch", lambda: launch(cu, fn, 7))
    if key in CLOSED:
        out["threads after a launch"] = len(os.listdir("/proc/self/task"))
    if isinstance(report, sb.SandboxReport):
        step("limit_memory", lambda: sb.limit_memory(report))
        out["memory"] = report.memory
        step("launch under the limit", lambda: launch(cu, fn, 9))
        step("cuMemAllocHost under the limit", lambda: pinned(cu))
    step("memfd registered, copied to the GPU", lambda: register(cu, shared, dptr))
except Failed:
    pass
except BaseException as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out), flush=True)
"""

# name: (how the child is wrapped, the child's configuration, what bubblewrap binds beside the defaults)
CASES: list[tuple[str, str, str, list[str] | str | None]] = [
    ("none", "", "none", None),
    ("landlock-writes-only", "", "landlock-writes-only", None),
    ("landlock", "", "landlock", None),
    ("landlock-wide-reads", "", "landlock-wide-reads", None),
    ("seccomp", "", "seccomp", None),
    ("seccomp-allow-shared-anon", "", "seccomp-allow-shared-anon", None),
    ("seccomp-allow-unix", "", "seccomp-allow-unix", None),
    ("landlock+seccomp (capabilities kept)", "", "landlock+seccomp", None),
    ("sandbox (enter_sandbox)", "", "sandbox", None),
    ("sandbox-allow-shared-anon", "", "sandbox-allow-shared-anon", None),
    ("sandbox-allow-unix", "", "sandbox-allow-unix", None),
    ("sandbox-wide-reads", "", "sandbox-wide-reads", None),
    ("sandbox-legacy (worker, one_launch)", "", "sandbox-legacy", None),
    ("bwrap (allowed roots bound)", "bwrap", "bwrap", None),
    ("bwrap with / bound (worker, one_launch)", "bwrap", "bwrap", ["/"]),
    # compute-sanitizer over a confined process: the proof gate's ways for host code an LLM wrote.
    ("sanitizer: sandbox", "sanitizer", "sandbox", None),
    ("sanitizer: sandbox-allow-unix", "sanitizer", "sandbox-allow-unix", None),
    ("sanitizer: sandbox-legacy", "sanitizer", "sandbox-legacy", None),
    ("sanitizer: bwrap with / bound", "sanitizer+bwrap", "bwrap", ["/"]),
    # Issue 46: the accused and the proof gate as they are entered now.
    ("accused (closed after the start)", "", "accused", None),
    ("accused in bwrap (closed after the start)", "bwrap", "accused-bwrap", None),
    ("sanitizer: gate (closed after the start)", "sanitizer", "gate", None),
    ("sanitizer: gate, threads allowed", "sanitizer", "gate-threads", None),
    ("sanitizer+bwrap: gate (closed after the start)", "sanitizer+bwrap", "gate-bwrap", "tool"),
]


def send_memfd(sock: socket.socket) -> int:
    """A sealed memfd with the marker, sent as the accused's parent sends its buffers."""
    fd = os.memfd_create("kernel-lsp-matrix", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, MEMFD_BYTES)
    os.pwrite(fd, MARKER, 0)
    with contextlib.suppress(OSError, AttributeError):  # sealed: the child cannot grow it
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    socket.send_fds(sock, [b"memfd"], [fd])
    return fd


def command(wrap: str, config: str, folder: str, fd: int, readable: list[str] | str | None) -> list[str] | str:
    from kernel_lsp.fence.sandbox import bwrap_command, find_bwrap

    cmd = [sys.executable, "-c", CHILD, config, folder, str(fd)]
    sanitizer = shutil.which("compute-sanitizer")
    if "sanitizer" in wrap:
        if sanitizer is None:
            return "no compute-sanitizer on PATH"
        cmd = [sanitizer, "--tool", "memcheck", *cmd]
    if "bwrap" in wrap:
        bwrap = find_bwrap()
        if bwrap is None:
            return "no bwrap"
        if readable == "tool":  # as runner/one_launch.tool_command wraps the gate's tool
            tool_home = [os.path.dirname(os.path.realpath(sanitizer))] if sanitizer else []
            return bwrap_command(bwrap, folder, cmd, tool_home, writable=True)
        cmd = bwrap_command(bwrap, folder, cmd, readable)
    return cmd


def run_case(name: str, wrap: str, config: str, readable: list[str] | str | None) -> str:
    folder = tempfile.mkdtemp(prefix="klsp-box-")
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cmd = command(wrap, config, folder, child.fileno(), readable)
    if isinstance(cmd, str):
        return cmd
    # The repository first, then wherever the caller's packages are (wheels unpacked to a folder
    # on PYTHONPATH on the GPU machines: landlockpy, pyseccomp).
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "TMPDIR": folder, "PYTHONPATH": os.pathsep.join(paths)}
    memfd = -1
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, pass_fds=[child.fileno()]
        )
        child.close()
        memfd = send_memfd(parent)
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr = "timed out after 180 s; " + stderr
    except OSError as e:
        return f"could not start: {e}"
    finally:
        parent.close()
    answered = memfd >= 0 and os.pread(memfd, len(ANSWER), 64) == ANSWER
    answers = [line for line in stdout.splitlines() if line.startswith("{")]
    got = answers[-1] if answers else json.dumps({"rc": proc.returncode, "stderr": stderr[-400:]})
    got += f" | parent saw the answer in the memfd: {answered}"
    if "sanitizer" in wrap:  # and what the sanitizer said (its summary, or why it stopped)
        said = [line for line in (stdout + stderr).splitlines() if line.startswith("=========")]
        got += " | " + " / ".join(said[-2:])
    shutil.rmtree(folder, ignore_errors=True)
    return got


def summary(got: str) -> str:
    """The first failing step of the child's answer, or "all ok"."""
    try:
        answer = json.loads(got.split(" | ")[0])
    except json.JSONDecodeError:
        return "no answer"
    failed = [f"{k}: {v}" for k, v in answer.get("steps", {}).items() if v != "ok"]
    return failed[0] if failed else answer.get("error", "all ok" if answer.get("steps") else "no steps")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", help="run only the cases whose name contains one of these")
    args = parser.parse_args()
    print("| case | result | detail |\n|---|---|---|", flush=True)
    for name, wrap, config, readable in CASES:
        if args.only and not any(o in name for o in args.only):
            continue
        try:
            got = run_case(name, wrap, config, readable)
        except Exception as e:  # one broken case must not hide the others
            got = f"{type(e).__name__}: {e}"
        print(f"| {name} | {summary(got)} | {got} |", flush=True)
    print("after: /dev/shm has", sorted(os.listdir("/dev/shm"))[:10])
    return 0


if __name__ == "__main__":
    sys.exit(main())
