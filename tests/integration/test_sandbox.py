"""The sandbox around host code an LLM wrote, proven on the CPU: a sandboxed process cannot write
outside its folder, open a network socket or start a program; a sandboxed GPU worker (fake GPU)
runs a launcher that tries both and finds them refused; code that is not the user's runs only in
a sandboxed worker; and a worker that cannot sandbox itself refuses to run anything (fail closed).
Issue 30's escapes (io_uring, other processes, signals, the terminal, metadata, unix sockets,
reads, uncounted memory) are tried by one hostile child further down, with harmless markers."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from escape_targets import SECRET, Targets, nothing_got_out, scheduling
from escape_targets import hostile as aimed_at

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import SINGLE_THREADED, SandboxUnavailable, enter_sandbox, in_process_available
from kernel_lsp.gpu import GpuCheckRequest, GpuSession, check_file
from kernel_lsp.model import TimingSettings

needs_sandbox = pytest.mark.skipif(
    in_process_available() is not None, reason=f"no Landlock/seccomp here: {in_process_available()}"
)
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
FAST = TimingSettings(warmup_s=0.0, budget_s=0.01, min_samples=5, max_samples=5)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
REPO = str(Path(__file__).resolve().parents[2])

CHILD = textwrap.dedent(
    """
    import os, socket, sys
    from kernel_lsp.fence.sandbox import enter_sandbox, limit_memory
    folder, outside = sys.argv[1], sys.argv[2]
    report = enter_sandbox(folder)
    limit_memory(report, 256 << 20)
    def attempt(what, fn):
        try:
            fn()
            print(what, "allowed")
        except (OSError, MemoryError) as e:
            print(what, "refused", type(e).__name__)
    attempt("write inside", lambda: open(os.path.join(folder, "ok"), "w").write("x"))
    attempt("write outside", lambda: open(outside, "w").write("x"))
    attempt("mkdir outside", lambda: os.mkdir(outside + ".d"))
    attempt("tcp socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("udp socket", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
    attempt("unix socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    attempt("socketpair", lambda: [s.close() for s in socket.socketpair()])
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("fork", lambda: os.fork() or None)
    attempt("big allocation", lambda: bytearray(1 << 30))
    print("files:", report.files, "network:", report.network, "memory:", report.memory)
    """
)


@needs_sandbox
def test_a_sandboxed_process_cannot_write_outside_its_folder_or_reach_the_network(tmp_path):
    folder, outside = tmp_path / "box", tmp_path / "outside.txt"
    folder.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(outside)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = {}
    for line in proc.stdout.splitlines():
        for verdict in ("allowed", "refused"):
            if f" {verdict}" in line:
                lines[line.split(f" {verdict}")[0]] = verdict
    for refused in (
        "write inside",  # nothing is written anywhere: no disk to fill
        "socketpair",
        "unix socket",
        "write outside",
        "mkdir outside",
        "tcp socket",
        "udp socket",
        "exec",
        "fork",
        "big allocation",
    ):
        assert lines[refused] == "refused", proc.stdout
    assert not outside.exists() and not (folder / "ok").exists()
    assert "landlock" in proc.stdout and "seccomp" in proc.stdout and "RLIMIT_DATA" in proc.stdout


def test_no_mechanism_means_no_sandbox(monkeypatch):
    import kernel_lsp.fence.sandbox as sandbox

    def broken(*args, **kwargs):
        raise OSError("not here")

    for name in ("restrict_files", "restrict_syscalls", "drop_capabilities"):
        monkeypatch.setattr(sandbox, name, broken)
    with pytest.raises(SandboxUnavailable) as e:
        enter_sandbox("/tmp")
    message = str(e.value)
    assert message.startswith(
        "cannot confine file writes, file reads, network, programs, io_uring, other processes"
    )
    assert "landlock: OSError: not here" in message and "seccomp: OSError: not here" in message


@needs_sandbox
def test_seccomp_fails_closed_where_a_syscall_cannot_be_refused(monkeypatch):
    """A libseccomp that does not know a syscall of an essential group (and no known number):
    no filter is loaded and the protection is reported missing."""
    import kernel_lsp.fence.sandbox as sandbox

    monkeypatch.setattr(sandbox, "IO_URING", (*sandbox.IO_URING, "io_uring_of_the_future"))
    with pytest.raises(OSError, match="seccomp cannot refuse io_uring_of_the_future"):
        sandbox.restrict_syscalls()  # raises before the filter is loaded into this process


def test_an_accused_that_cannot_sandbox_itself_runs_nothing(tmp_path):
    # A folder that does not exist: Landlock cannot grant it, so writes cannot be confined.

    from kernel_lsp.runner.accused import receive, send

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cmd = [sys.executable, "-m", "kernel_lsp.runner.accused", "--fd", str(theirs.fileno()), "--fake"]
    proc = subprocess.Popen([*cmd, "--sandbox", str(tmp_path / "missing")], pass_fds=[theirs.fileno()])
    theirs.close()
    try:
        send(ours, {"op": "hello"})
        reply, _ = receive(ours)
        assert reply["available"] is False
        assert "cannot confine file writes" in reply["sandbox_error"]
        send(ours, {"op": "load", "image": "x", "steps": []})
        refused, _ = receive(ours)
        assert refused["status"] == "fault" and refused["sticky"]
    finally:
        proc.kill()
        proc.wait()
        ours.close()


def test_a_judge_whose_accused_cannot_be_confined_judges_nothing(monkeypatch, tmp_path):
    """Fail closed: every mechanism tried, none confines: no accused, and the reason says why."""
    import kernel_lsp.runner.judge as judge

    real = judge.sandboxed_command

    def broken(command, env, folder, **kw):
        return real(command, env, str(tmp_path / "missing"), **kw)

    monkeypatch.setattr(judge, "sandboxed_command", broken)
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", "landlock")
    accused, _mechanism, why = judge.start_accused(0, True, ["landlock"])
    assert accused is None and "cannot confine file writes" in why, why


PROBE = r"""#include <cstdio>
#include <cstddef>
#include <sys/socket.h>
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n) {
    FILE* f = fopen("OUTSIDE", "w");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    bool confined = (f == nullptr) && (s < 0);
    if (f) fclose(f);
    for (size_t i = 0; i < n; ++i) out[i] = confined ? x[i] + y[i] : 0.0f;
}
"""
PROBE_SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(entry="saxpy", sizes=[{"n": 64}],
    args={"x": In("float32"), "y": In("float32"), "out": Out("float32"), "n": Scalar("uint64")},
    reference=lambda x, y: {"out": x + y})
"""


@needs_sandbox
@needs_nvcc
def test_the_sandboxed_worker_refuses_writes_outside_and_sockets_to_the_code_it_runs(tmp_path):
    outside = tmp_path / "written-by-the-launcher.txt"
    (tmp_path / "probe.cu").write_text(PROBE.replace("OUTSIDE", str(outside)))
    (tmp_path / "probe.spec.py").write_text(PROBE_SPEC)
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as gpu:
        (check,) = check_file(gpu, str(tmp_path / "probe.cu"), compile_options=OPTIONS)
        assert "landlock" in gpu.backend.sandbox["files"] and "seccomp" in gpu.backend.sandbox["network"]
    assert check.ok, check.message  # the launcher saw both refused
    assert not outside.exists()
    # The same launcher outside the sandbox: both succeed, so the outputs are zeros.
    with GpuSession(fake=True, timing=FAST) as gpu:
        (check,) = check_file(gpu, str(tmp_path / "probe.cu"), compile_options=OPTIONS)
    assert not check.ok and "every element is 0" in check.message
    assert outside.exists()


CANDIDATE = r"""#include <cstddef>
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}
"""


@needs_nvcc
@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=needs_sandbox)])
def test_code_the_user_did_not_write_runs_only_sandboxed(tmp_path, sandboxed):
    path = tmp_path / "probe.cu"
    path.write_text(PROBE)
    (tmp_path / "probe.spec.py").write_text(PROBE_SPEC)
    with GpuSession(fake=True, timing=FAST, sandboxed=sandboxed) as gpu:
        build = gpu.build_library(CANDIDATE, str(path), OPTIONS, candidate_of=PROBE)
        assert build.fence == [] and not build.trusted
        spec = str(tmp_path / "probe.spec.py")
        check = gpu.check(GpuCheckRequest(CANDIDATE, str(path), kernel="saxpy", spec=spec, artifact=build))
    if sandboxed:
        assert check.ok, check.message
    else:
        assert not check.ok and check.problems[0].kind == "sandbox"
        assert "runs only in a sandboxed GPU worker" in check.message


@needs_sandbox
@needs_nvcc
def test_bubblewrap_around_the_worker_where_it_is_asked_for(tmp_path, monkeypatch):
    from kernel_lsp.fence.sandbox import bwrap_available

    why = bwrap_available(str(tmp_path))
    if why:
        pytest.skip(why)
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", "bwrap")
    outside = tmp_path / "written-by-the-launcher.txt"
    (tmp_path / "probe.cu").write_text(PROBE.replace("OUTSIDE", str(outside)))
    (tmp_path / "probe.spec.py").write_text(PROBE_SPEC)
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as gpu:
        (check,) = check_file(gpu, str(tmp_path / "probe.cu"), compile_options=OPTIONS)
        assert gpu.backend.sandbox["files"].startswith("bwrap")
    assert check.ok, check.message
    assert not outside.exists()


def test_the_sandboxed_worker_gets_no_secrets(tmp_path):
    from kernel_lsp.fence.sandbox import sandboxed_command

    env = {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-secret", "HOME": "/root", "PYTHONPATH": "/x"}
    env["KERNEL_LSP_CTX_SCHED"] = "spin"  # the judge's own switch: the accused waits as it does
    command, clean = sandboxed_command(["python", "-m", "kernel_lsp.runner.worker"], env, str(tmp_path))
    assert "OPENAI_API_KEY" not in clean and clean["HOME"] == str(tmp_path) and clean["PATH"] == "/usr/bin"
    assert clean["KERNEL_LSP_CTX_SCHED"] == "spin"
    assert command[-2:] == ["--sandbox", str(tmp_path)] or "--sandbox-outer" in command


def test_a_tool_over_a_candidates_launch_gets_no_secrets_and_its_workers_sandbox(tmp_path, monkeypatch):
    from kernel_lsp.runner.one_launch import main, tool_command

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    entry = {"kind": "entry", "trusted": False}
    tool = ["compute-sanitizer", "--tool", "memcheck"]
    trusted_cmd, trusted_env = tool_command(tool, {"steps": [{**entry, "trusted": True}]}, str(tmp_path))
    assert (
        trusted_cmd[:3] == tool
        and trusted_cmd[-1] == str(tmp_path)
        and "kernel_lsp.runner.one_launch" in trusted_cmd
    )
    assert (
        trusted_env["PYTHONPATH"].split(":")[0] and trusted_env["OPENAI_API_KEY"] == "sk-secret"
    )  # the user's own
    import kernel_lsp.runner.one_launch as one_launch

    monkeypatch.setattr(one_launch, "bwrap_usable", lambda: False)  # no bubblewrap here
    inside, env = tool_command(tool, {"steps": [entry]}, str(tmp_path))
    assert inside == trusted_cmd  # the launch confines itself once the tool has started it
    assert "OPENAI_API_KEY" not in env and env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["PYTHONPATH"] == trusted_env["PYTHONPATH"]
    monkeypatch.setattr(one_launch, "bwrap_usable", lambda: True)  # where it works, whatever the worker's
    wrapped, env = tool_command(tool, {"steps": [entry]}, str(tmp_path))
    assert wrapped[0].endswith("bwrap") and wrapped[-2:] == ["--sandbox-outer", "bwrap"]
    assert ["--bind", str(tmp_path), str(tmp_path)] == wrapped[wrapped.index("--bind") :][:3]  # the tool's
    trusted_again, _ = tool_command(tool, {"steps": [{**entry, "trusted": True}]}, str(tmp_path))
    assert trusted_again == trusted_cmd  # the user's own code is not wrapped
    wrapped, env = tool_command(tool, {"steps": [entry], "sandbox": "bwrap"}, str(tmp_path))
    assert "--unshare-net" in wrapped and wrapped[wrapped.index("--") + 1 :][:3] == tool
    assert wrapped[-2:] == ["--sandbox-outer", "bwrap"] and "OPENAI_API_KEY" not in env
    with pytest.raises(FileNotFoundError):  # the arguments are read: JOB_DIR, then the outer sandbox
        main([str(tmp_path / "missing"), "--sandbox-outer", "bwrap"])


@needs_sandbox
@needs_nvcc
@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_the_proof_gate_runs_a_candidate_confined_as_its_worker_is(tmp_path, monkeypatch, mechanism):
    """On an H100 host the GPU would not open under Landlock: the worker ran inside bubblewrap,
    and compute-sanitizer's launch of the candidate, confined in-process, failed before its first
    CUDA call. The launch now follows the worker's mechanism."""
    from kernel_lsp.fence.sandbox import bwrap_available

    if mechanism == "bwrap" and bwrap_available(str(tmp_path)):
        pytest.skip(bwrap_available(str(tmp_path)))
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
    fake_sanitizer = Path(__file__).resolve().parents[1] / "fixtures" / "fake_sanitizer.py"
    monkeypatch.setenv("KERNEL_LSP_COMPUTE_SANITIZER", str(fake_sanitizer))
    path = tmp_path / "probe.cu"
    path.write_text(PROBE.replace("OUTSIDE", str(tmp_path / "outside.txt")))
    (tmp_path / "probe.spec.py").write_text(PROBE_SPEC)
    candidate = CANDIDATE.replace("extern", "// rewritten\nextern", 1)
    spec = str(tmp_path / "probe.spec.py")
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as gpu:
        build = gpu.build_library(candidate, str(path), OPTIONS, candidate_of=path.read_text())
        assert build.fence == [] and not build.trusted
        request = GpuCheckRequest(candidate, str(path), kernel="saxpy", spec=spec, artifact=build)
        check = gpu.check(request)
        assert check.ok, check.message
        assert gpu.backend.sandbox["files"].startswith("bwrap") is (mechanism == "bwrap")
        assert gpu.backend._sandbox_kind() == ("bwrap" if mechanism == "bwrap" else "")
        report = gpu.prove(request)
    assert report.note == "" and report.findings == [], report.note
    assert sorted(report.tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]


# --- issue 30: the sandbox assumes the fence was bypassed ---------------------------------------
# One child enters the sandbox and tries each escape with a harmless marker (signal 0, a victim
# process the test owns, files the test made); the tests below read its verdicts. "refused EPERM"
# is seccomp's answer (or Landlock scope's), "refused EACCES" Landlock's or socket()'s.

HOSTILE = textwrap.dedent(
    r"""
    import ctypes, errno, fcntl, json, mmap, os, resource, signal, socket, stat, sys, termios, threading, time
    import pyseccomp
    from kernel_lsp.fence.sandbox import UNIFIED_NUMBERS, close_after_start, enter_sandbox, limit_memory, restrict_files

    cfg = json.loads(sys.argv[1])
    folder, victim, outside = cfg["folder"], cfg["victim"], cfg["outside"]
    try:
        master, tty = os.openpty()  # before: /dev/ptmx is not readable inside
    except OSError:  # bubblewrap's /dev has no terminal at all
        master = tty = -1
    parent_memfd = os.memfd_create("as-the-parent-sends-it")
    os.ftruncate(parent_memfd, 1 << 20)
    libc = ctypes.CDLL(None, use_errno=True)
    results = {}
    # As the CUDA driver leaves them: a datagram socket of its own, made before the GPU closes.
    early_dgram = None
    if cfg["mode"] == "landlock only":
        results["protections"], results["tried"] = restrict_files(folder)
    elif cfg["mode"] == "accused":  # as runner/accused.py: open for the driver's start, then closed
        channel, judge_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        report = enter_sandbox(folder, cfg["outer"], cuda_start=True)
        early_dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        threading.Thread(target=lambda: None).start()  # the driver's threads start before close
        close_after_start(report, channel=channel.fileno())
        limit_memory(report, 256 << 20)
        results.update(report.to_dict())
    elif cfg["mode"] == "gate":  # as runner/one_launch.py under a tool that started a thread first
        import queue
        asks, answers = queue.Queue(), queue.Queue()

        def tool_thread():  # runs whatever it is handed: a hijacked thread of the tool's
            while True:
                fn = asks.get()
                try:
                    fn()
                    answers.put("allowed")
                except OSError as e:
                    answers.put("refused " + errno.errorcode.get(e.errno, str(e.errno)))

        threading.Thread(target=tool_thread, daemon=True).start()
        try:
            report = enter_sandbox(
                folder, cfg["outer"], allow_unix_sockets=True, cuda_start=True, landlock_in_bwrap=True
            )
        except Exception as e:
            print(json.dumps({"enter": type(e).__name__ + ": " + str(e)}))
            sys.exit(0)
        close_after_start(report)
        limit_memory(report, 256 << 20)
        results.update(report.to_dict())
        for what, fn in (
            ("write inside", lambda: open(os.path.join(folder, "from-the-tool-thread"), "w").close()),
            ("read home", lambda: open(cfg["home_secret"]).read()),
            ("open /dev/null for writing", lambda: open("/dev/null", "w").close()),
            ("read own status", lambda: open("/proc/self/status").read()),
        ):
            asks.put(fn)
            results["early thread: " + what] = answers.get(timeout=10)
    else:
        report = enter_sandbox(folder, cfg["outer"], deny_shared_anonymous=cfg["deny_shared_anonymous"])
        limit_memory(report, 256 << 20)
        results.update(report.to_dict())

    def attempt(what, fn):
        try:
            fn()
            results[what] = "allowed"
        except (MemoryError, ValueError) as e:  # setrlimit says EPERM as ValueError
            results[what] = "refused " + type(e).__name__
        except OSError as e:
            results[what] = "refused " + errno.errorcode.get(e.errno, str(e.errno))

    def syscall(name, *args):
        number = pyseccomp.resolve_syscall(0, name)
        number = UNIFIED_NUMBERS.get(name, number) if number == -1 else number
        args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        if libc.syscall(ctypes.c_long(number), *args) == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def connect(family, address):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(address)

    # io_uring: its SOCKET/SENDMSG ops would bypass the socket() filter.
    attempt("io_uring_setup", lambda: syscall("io_uring_setup", 4, ctypes.create_string_buffer(120)))
    attempt("io_uring_enter", lambda: syscall("io_uring_enter", 0x7FFFFFFF, 0, 0, 0, 0, 0))
    attempt("io_uring_register", lambda: syscall("io_uring_register", 0x7FFFFFFF, 0, 0, 0))
    # Other processes: trace, read, grab their files.
    local = ctypes.create_string_buffer(8)
    mine = (ctypes.c_void_p * 2)(ctypes.addressof(local), 8)
    theirs = (ctypes.c_void_p * 2)(0, 8)  # address 0 in the victim: EFAULT were it let through
    attempt("ptrace attach", lambda: syscall("ptrace", 16, victim, 0, 0))
    attempt("process_vm_readv", lambda: syscall("process_vm_readv", victim, mine, 1, theirs, 1, 0))
    attempt("process_vm_writev", lambda: syscall("process_vm_writev", victim, mine, 1, theirs, 1, 0))
    attempt("pidfd_open", lambda: syscall("pidfd_open", victim, 0))
    attempt("pidfd_getfd", lambda: syscall("pidfd_getfd", 0x7FFFFFFF, 0, 0))
    attempt("pidfd_send_signal", lambda: syscall("pidfd_send_signal", 0x7FFFFFFF, 0, 0, 0))
    attempt("kcmp", lambda: syscall("kcmp", os.getpid(), victim, 0, 0, 0))
    attempt("process_madvise", lambda: syscall("process_madvise", 0x7FFFFFFF, 0, 0, 0, 0))
    # The terminal: push input into it, the console's tricks, SIGIO to another process.
    attempt("TIOCSTI", lambda: fcntl.ioctl(tty, termios.TIOCSTI, b"#"))
    attempt("TIOCSTI with high bits", lambda: syscall("ioctl", tty, (1 << 32) | 0x5412, ctypes.c_char_p(b"#")))
    attempt("TIOCLINUX", lambda: fcntl.ioctl(tty, 0x541C, b"\x06\x00"))
    attempt("F_SETOWN", lambda: fcntl.fcntl(master, fcntl.F_SETOWN, victim))
    # Metadata outside the folder (Landlock does not see it), a device node inside.
    attempt("chmod outside", lambda: os.chmod(outside, 0o777))
    attempt("chown outside", lambda: os.chown(outside, os.getuid(), os.getgid()))
    attempt("utime outside", lambda: os.utime(outside, (0, 0)))
    attempt("setxattr outside", lambda: os.setxattr(outside, "user.kernel_lsp", b"1"))
    attempt("removexattr outside", lambda: os.removexattr(outside, "user.kernel_lsp"))
    attempt("truncate outside", lambda: os.truncate(outside, 0))
    # Newer than some libseccomp (2.5.4 knows neither): refused by their unified numbers.
    attempt("setxattrat", lambda: syscall("setxattrat", 0x7FFFFFFF, 0, 0, 0, 0, 0))
    attempt("fchmodat2", lambda: syscall("fchmodat2", 0x7FFFFFFF, 0, 0o777, 0))
    inside, given = os.path.join(folder, "made-inside"), os.path.join(folder, "given")
    attempt("write inside", lambda: open(inside, "w").write("x"))
    attempt("read inside", lambda: open(given).read())
    attempt("chmod inside", lambda: os.chmod(given, 0o600))
    attempt("mknod inside", lambda: os.mknod(os.path.join(folder, "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3)))
    # Signals: only to itself.
    queued = ctypes.create_string_buffer(128)
    ctypes.c_int.from_buffer(queued, 8).value = -1  # si_code SI_QUEUE
    attempt("kill victim", lambda: os.kill(victim, signal.SIGTERM))
    attempt("kill parent", lambda: os.kill(os.getppid(), 0))
    attempt("kill own group", lambda: os.kill(0, 0))
    attempt("kill everyone", lambda: os.kill(-1, 0))
    attempt("tgkill victim", lambda: syscall("tgkill", victim, victim, 0))
    attempt("tkill victim", lambda: syscall("tkill", victim, 0))
    attempt("sigqueue victim", lambda: syscall("rt_sigqueueinfo", victim, 0, queued))
    attempt("prlimit victim", lambda: resource.prlimit(victim, resource.RLIMIT_NOFILE))
    attempt("kill self", lambda: os.kill(os.getpid(), 0))
    attempt("signal own thread", lambda: signal.pthread_kill(threading.get_ident(), 0))
    # Sockets: none but the inherited ones and socketpair().
    attempt("connect unix path", lambda: connect(socket.AF_UNIX, cfg["unix_path"]))
    attempt("connect unix abstract", lambda: connect(socket.AF_UNIX, "\0" + cfg["abstract"]))
    attempt("connect tcp", lambda: connect(socket.AF_INET, ("127.0.0.1", cfg["tcp_port"])))
    attempt("netlink socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
    attempt("socketpair", lambda: [s.close() for s in socket.socketpair()])

    def datagram_to_a_path():  # journald's /dev/log, any daemon's datagram socket
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(b"from the sandbox", cfg["dgram_path"])

    attempt("socketpair then sendto a path", datagram_to_a_path)
    if early_dgram is not None:
        attempt("sendto a path on an early socket", lambda: early_dgram.sendto(b"early", cfg["dgram_path"]))
        attempt(
            "sendmsg to a path on an early socket",
            lambda: early_dgram.sendmsg([b"early"], [], 0, cfg["dgram_path"]),
        )
        attempt("connect an early socket", lambda: early_dgram.connect(cfg["dgram_path"]))
        attempt("send on the judge's socket", lambda: channel.sendmsg([b"answer"]))
    # IPC no namespace separates in Landlock mode: a SysV queue and semaphore the test made, a
    # POSIX queue.
    libc.msgget.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.msgsnd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def sysv(fn, *args):
        if fn(*args) == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def send_to_queue():
        queue = libc.msgget(cfg["msg_key"], 0)
        if queue == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        message = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00secret", 24)
        sysv(libc.msgsnd, queue, message, 16, 0x800)  # IPC_NOWAIT

    attempt("SysV message queue", send_to_queue)
    attempt("SysV semaphore", lambda: sysv(libc.semget, cfg["msg_key"], 1, 0o1600))
    attempt("POSIX message queue", lambda: sysv(libc.mq_open, b"/kernel-lsp-test", 0o102, 0o600, None))
    # Other processes' scheduling: nice, affinity, policy, I/O priority; one's own stays allowed.
    attempt("renice victim", lambda: os.setpriority(os.PRIO_PROCESS, victim, 19))
    attempt("renice victim's group", lambda: os.setpriority(os.PRIO_PGRP, victim, 19))
    attempt("pin victim", lambda: os.sched_setaffinity(victim, {0}))
    attempt("SCHED_IDLE victim", lambda: os.sched_setscheduler(victim, os.SCHED_IDLE, os.sched_param(0)))
    attempt("I/O priority of victim", lambda: syscall("ioprio_set", 1, victim, (3 << 13)))
    # One step lower priority than it has: allowed at any niceness (to 1 was refused where the
    # tests themselves ran under `nice -n 19`: raising priority needs CAP_SYS_NICE).
    own = os.getpriority(os.PRIO_PROCESS, 0)
    attempt("renice self", lambda: os.setpriority(os.PRIO_PROCESS, 0, min(19, own + 1)))
    attempt("pin self", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
    # Threads: a bomb.
    started = []

    def bomb():
        threading.stack_size(1 << 16)  # small stacks: RLIMIT_DATA counts them
        for _ in range(64):
            t = threading.Thread(target=time.sleep, args=(5,), daemon=True)
            t.start()
            started.append(t)

    try:
        bomb()
        results["threads started"] = len(started)
    except RuntimeError:
        results["threads started"] = len(started)
    # Disk and memory nothing counts: files in the folder, /dev/shm, a writable /dev/zero.
    attempt("write /dev/shm", lambda: open("/dev/shm/kernel-lsp-test-" + str(os.getpid()), "w").write("x"))
    attempt("open /dev/zero for writing", lambda: os.close(os.open("/dev/zero", os.O_RDWR)))
    attempt("open kernel.core_pattern for writing", lambda: open("/proc/sys/kernel/core_pattern", "w").close())
    attempt("open /dev/kmsg", lambda: open("/dev/kmsg", "rb").close())
    attempt("open /dev/userfaultfd", lambda: os.close(os.open("/dev/userfaultfd", os.O_RDWR)))
    try:
        results["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        results["processes"] = None  # /proc itself is not listable (Landlock)
    results["pid"] = os.getpid()
    attempt("map /dev/zero read-only", lambda: mmap.mmap(os.open("/dev/zero", os.O_RDONLY), 1 << 20, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ).close())
    # Reads: what the run needs, not the home folder, the workspace, another process's /proc.
    attempt("read home", lambda: open(cfg["home_secret"]).read())
    attempt("read another temp folder", lambda: open(cfg["temp_secret"]).read())
    attempt("read the workspace", lambda: open(cfg["workspace_file"]).read())
    attempt("list the current folder", lambda: os.listdir("."))
    attempt("read parent environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
    attempt("read victim environ", lambda: open(f"/proc/{victim}/environ", "rb").read())
    attempt("read the test's environ", lambda: open(f"/proc/{cfg['test_pid']}/environ", "rb").read())
    attempt("read own status", lambda: open("/proc/self/status").read())
    attempt("read ld.so.cache", lambda: open("/etc/ld.so.cache", "rb").read(16))
    attempt("import numpy", lambda: __import__("numpy").ones(2).sum())
    # Memory RLIMIT_DATA does not count, and the limit itself.
    attempt("shared anonymous 12 GiB", lambda: mmap.mmap(-1, 12 << 30, flags=mmap.MAP_SHARED).close())
    attempt("memfd_create", lambda: os.close(os.memfd_create("mine")))
    attempt("map the parent's memfd", lambda: mmap.mmap(parent_memfd, 1 << 20, flags=mmap.MAP_SHARED).close())
    attempt("private 1 MiB", lambda: mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE).close())
    attempt("big allocation", lambda: bytearray(1 << 30))
    infinite = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    attempt("raise the memory limit", lambda: resource.setrlimit(resource.RLIMIT_DATA, infinite))
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    lower = (ctypes.c_uint64 * 2)(soft - (1 << 20), hard)  # a change the kernel alone would allow
    attempt("change the memory limit", lambda: syscall("prlimit64", 0, resource.RLIMIT_DATA, lower, 0))
    attempt("exec", lambda: os.execv(sys.executable, [sys.executable, "-c", "print('escaped')"]))
    print(json.dumps(results))
    """
)


def xattrs(path: Path) -> list[str]:
    """The file's extended attributes; none where its filesystem has none."""
    try:
        return os.listxattr(path)
    except OSError:
        return []


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Targets the test owns (tests/escape_targets.py: a victim process, listening sockets, a
    SysV queue, secrets outside the folder) and a runner of HOSTILE against them; checks
    afterwards that none was touched."""
    root = tmp_path_factory.mktemp("hostile")
    targets = Targets(root)
    temp, workspace = root / "elsewhere", root / "workspace"
    for d in (temp, workspace):
        d.mkdir()
    (temp / "secret").write_text("temp secret")
    (workspace / "main.cu").write_text("// the user's code")
    victim = targets.victim
    cfg = {
        "victim": victim.pid,
        "unix_path": targets.unix_path,
        "dgram_path": targets.dgram_path,
        "msg_key": targets.sysv.key,
        "abstract": targets.abstract,
        "tcp_port": targets.tcp_port,
        "home_secret": str(targets.secret_path),
        "temp_secret": str(temp / "secret"),
        "workspace_file": str(workspace / "main.cu"),
        "test_pid": os.getpid(),  # the parent under bubblewrap is bwrap's, in its PID namespace
    }
    runs = iter(range(1000))
    verdicts: list[dict] = []

    def run(mode: str = "sandbox", outer: str = "", deny_shared_anonymous: bool = True) -> dict:
        n = next(runs)
        folder, outside = root / f"box{n}", root / f"outside{n}.txt"
        folder.mkdir()
        (folder / "given").write_text("what kernel-lsp put there")
        outside.write_text("untouched")
        outside.chmod(0o640)
        before = outside.stat()
        run_cfg = dict(cfg, folder=str(folder), outside=str(outside), mode=mode, outer=outer)
        child = json.dumps(dict(run_cfg, deny_shared_anonymous=deny_shared_anonymous))
        command = [sys.executable, "-c", HOSTILE, child]
        if outer == "bwrap":
            from kernel_lsp.fence.sandbox import bwrap_command, find_bwrap

            # The gate's bubblewrap lets the tool write the folder (runner/one_launch.tool_command).
            command = bwrap_command(find_bwrap() or "bwrap", str(folder), command, writable=mode == "gate")
        env = {"PATH": os.environ.get("PATH", "/usr/bin"), "HOME": str(targets.home), "PYTHONPATH": REPO}
        env.update(SINGLE_THREADED)  # as the judge starts its accused: no thread pool before Landlock
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=workspace, env=env)
        assert proc.returncode == 0 and "escaped" not in proc.stdout, proc.stdout + proc.stderr
        verdicts.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if "enter" in verdicts[-1]:  # it refused to run at all
            return verdicts.pop()
        if mode != "landlock only":  # seccomp refuses what Landlock cannot see: metadata
            after = outside.stat()
            assert outside.read_text() == "untouched" and stat.S_IMODE(after.st_mode) == 0o640
            assert after.st_mtime_ns == before.st_mtime_ns and not xattrs(outside)
        return verdicts[-1]

    try:
        yield run
        # Nothing outside was touched: the victim lives and runs as it did, a listening socket was
        # connected to only where a run said "allowed" (Landlock alone, before ABI 9, does not see
        # pathname unix sockets), and likewise for datagrams, the queue and the semaphore.
        assert victim.poll() is None
        assert scheduling(victim.pid) == targets.victim_scheduling or any(
            v[call] == "allowed"
            for v in verdicts
            for call in ("renice victim", "pin victim", "SCHED_IDLE victim")
        )
        for call, connected in targets.connected().items():
            assert connected == any(v[call] == "allowed" for v in verdicts), call
        sent = (
            "socketpair then sendto a path",
            "sendto a path on an early socket",
            "sendmsg to a path on an early socket",
        )
        datagrams = len(targets.datagrams())
        assert datagrams == sum(v.get(call) == "allowed" for v in verdicts for call in sent)
        assert len(targets.sysv.messages()) == sum(v["SysV message queue"] == "allowed" for v in verdicts)
        assert targets.sysv.semaphore_made() == any(v["SysV semaphore"] == "allowed" for v in verdicts)
    finally:
        targets.close()


@pytest.fixture(scope="module")
def sandboxed(hostile):
    """The verdicts of one fully sandboxed child (Landlock + seccomp, in-process)."""
    return hostile()


@needs_sandbox
def test_io_uring_is_refused(sandboxed):
    for call in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert sandboxed[call] == "refused EPERM", call


@needs_sandbox
def test_other_processes_cannot_be_traced_read_or_grabbed(sandboxed):
    for call in (
        "ptrace attach",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_open",
        "pidfd_getfd",
        "pidfd_send_signal",
        "kcmp",
        "process_madvise",
    ):
        assert sandboxed[call] == "refused EPERM", call


@needs_sandbox
def test_no_terminal_injection(sandboxed):
    for call in ("TIOCSTI", "TIOCSTI with high bits", "TIOCLINUX", "F_SETOWN"):
        assert sandboxed[call] == "refused EPERM", call


@needs_sandbox
def test_no_metadata_change_outside_and_nothing_written_inside(sandboxed):
    for call in (
        "chmod outside",
        "chown outside",
        "utime outside",
        "setxattr outside",
        "removexattr outside",
        "truncate outside",
        "setxattrat",
        "fchmodat2",
        "mknod inside",
        "chmod inside",  # the accused needs no chmod at all
    ):
        assert sandboxed[call] == "refused EPERM", call
    assert sandboxed["write inside"] == "refused EACCES"  # the folder is read-only too
    assert sandboxed["read inside"] == "allowed"


@needs_sandbox
def test_signals_reach_only_the_process_itself(sandboxed):
    for call in (
        "kill victim",
        "kill parent",
        "kill own group",  # the process group may hold the parent
        "kill everyone",
        "tgkill victim",
        "tkill victim",
        "sigqueue victim",
        "prlimit victim",
    ):
        assert sandboxed[call] == "refused EPERM", call
    assert sandboxed["kill self"] == sandboxed["signal own thread"] == "allowed"


@needs_sandbox
def test_no_socket_reaches_a_listening_unix_or_tcp_socket(sandboxed):
    for call in ("connect unix path", "connect unix abstract", "connect tcp", "netlink socket"):
        assert sandboxed[call] == "refused EACCES", call  # socket() itself
    assert sandboxed["socketpair"] == "refused EACCES"


@needs_sandbox
def test_reads_are_limited_to_what_the_run_needs(sandboxed):
    for call in ("read home", "read another temp folder", "read the workspace", "list the current folder"):
        assert sandboxed[call] == "refused EACCES", call
    for call in ("read inside", "read own status", "read ld.so.cache", "import numpy"):
        assert sandboxed[call] == "allowed", call


@needs_sandbox
def test_no_secret_in_another_process_environ(sandboxed):
    for call in ("read parent environ", "read victim environ", "read the test's environ"):
        assert sandboxed[call] == "refused EACCES", call


@needs_sandbox
def test_memory_rlimit_data_does_not_count_is_refused(sandboxed):
    assert sandboxed["shared anonymous 12 GiB"] == sandboxed["memfd_create"] == "refused EPERM"
    assert sandboxed["big allocation"] == "refused MemoryError"
    assert sandboxed["raise the memory limit"] == "refused ValueError"  # Python's word for EPERM
    assert sandboxed["change the memory limit"] == "refused EPERM"  # locked by seccomp
    # What the accused does need: the parent's memfds mapped shared, private maps.
    assert sandboxed["map the parent's memfd"] == sandboxed["private 1 MiB"] == "allowed"
    assert sandboxed["exec"] == "refused EPERM"


@needs_sandbox
def test_the_report_names_each_protection(sandboxed):
    said = "\n".join(sandboxed["protections"])
    for protection in (
        "file writes: landlock",
        "file reads: landlock",
        "sockets (all families, socketpair too): seccomp",
        "scheduling of other processes",
        "IPC with other processes",
        "io_uring: seccomp",
        "other processes",
        "terminal injection",
        "metadata",
        "RLIMIT_DATA",
        "no shared anonymous maps (seccomp)",
    ):
        assert protection in said, protection
    assert sandboxed["memory"].startswith("RLIMIT_DATA") and "no shared anonymous maps" in sandboxed["memory"]


@needs_sandbox
def test_shared_anonymous_maps_stay_allowed_where_the_caller_asks(hostile):
    """deny_shared_anonymous=False, should the CUDA driver need them: allowed, and said so."""
    verdicts = hostile(deny_shared_anonymous=False)
    assert verdicts["shared anonymous 12 GiB"] == verdicts["memfd_create"] == "allowed"
    assert "shared anonymous maps" in verdicts["tried"] and "no shared" not in verdicts["memory"]
    assert verdicts["io_uring_setup"] == "refused EPERM"  # the rest stays


@needs_sandbox
def test_landlock_alone_keeps_signals_abstract_sockets_tcp_and_programs_in(hostile):
    """The second layer, without seccomp: Landlock's scopes (ABI 6) refuse signals and abstract
    unix sockets outside the sandbox, its network rights TCP (ABI 4), EXECUTE every program."""
    import landlockpy

    if landlockpy.abi_version() < 6:
        pytest.skip(f"Landlock ABI {landlockpy.abi_version()} has no scopes")
    verdicts = hostile(mode="landlock only")
    assert verdicts["kill victim"] == verdicts["kill parent"] == "refused EPERM"
    assert verdicts["connect unix abstract"] == "refused EPERM"
    # (a pathname unix socket: Landlock ABI 9's RESOLVE_UNIX; seccomp's socket() refusal covers it)
    assert verdicts["connect tcp"] == "refused EACCES"
    assert verdicts["read home"] == verdicts["read parent environ"] == "refused EACCES"
    assert verdicts["exec"] == "refused EACCES"
    assert verdicts["kill self"] == verdicts["import numpy"] == "allowed"


@needs_sandbox
def test_bubblewrap_binds_only_what_the_run_needs(hostile, tmp_path):
    from kernel_lsp.fence.sandbox import bwrap_available

    why = bwrap_available(str(tmp_path))
    if why:
        pytest.skip(why)
    verdicts = hostile(outer="bwrap")
    # Not bound: the home folder, another temp folder, the workspace, the file outside.
    for call in ("read home", "read another temp folder", "read the workspace", "truncate outside"):
        assert verdicts[call].startswith("refused"), call
    # A new PID namespace: the parent and the victim are not there to read or signal.
    assert verdicts["read the test's environ"].startswith("refused")
    assert verdicts["read victim environ"].startswith("refused")
    assert verdicts["kill victim"].startswith("refused") and verdicts["io_uring_setup"] == "refused EPERM"
    assert verdicts["write inside"].startswith("refused")  # the folder is bound read-only
    assert verdicts["read inside"] == verdicts["import numpy"] == "allowed"
    assert verdicts["files"].startswith("bwrap") and "seccomp" in verdicts["network"]


# --- issue 46: what got past the accused's sandbox, in both modes ------------------------------
# "accused": as runner/accused.py enters it (open for the CUDA driver's start, with a datagram
# socket and threads of the driver's own, then `close_after_start`); "sandbox": enter_sandbox
# alone; each in-process (Landlock + seccomp) and inside bubblewrap.


@pytest.fixture(scope="module")
def modes(hostile, tmp_path_factory):
    """The verdicts of each mode that runs here: {(mode, outer): verdicts}."""
    from kernel_lsp.fence.sandbox import bwrap_available

    found = {("sandbox", ""): hostile(), ("accused", ""): hostile(mode="accused")}
    if bwrap_available(str(tmp_path_factory.mktemp("bwrap-probe"))) is None:
        found[("sandbox", "bwrap")] = hostile(outer="bwrap")
        found[("accused", "bwrap")] = hostile(mode="accused", outer="bwrap")
    return found


@needs_sandbox
def test_no_datagram_reaches_a_daemon_through_a_socketpair_or_an_early_socket(modes):
    for (mode, outer), v in modes.items():
        assert v["socketpair then sendto a path"] == "refused EACCES", (mode, outer)
        if mode == "accused":
            for call in (
                "sendto a path on an early socket",
                "sendmsg to a path on an early socket",
                "connect an early socket",
            ):
                assert v[call] == "refused EPERM", (mode, outer, call)
            assert v["send on the judge's socket"] == "allowed", outer


@needs_sandbox
def test_no_ipc_with_other_processes(modes):
    for (mode, outer), v in modes.items():
        for call in ("SysV message queue", "SysV semaphore", "POSIX message queue"):
            assert v[call] == "refused EPERM", (mode, outer, call)


@needs_sandbox
def test_other_processes_scheduling_is_not_touched_and_its_own_is(modes):
    for (mode, outer), v in modes.items():
        for call in (
            "renice victim",
            "renice victim's group",
            "pin victim",
            "SCHED_IDLE victim",
            "I/O priority of victim",
        ):
            # seccomp's EPERM; under bubblewrap the victim is not even in the PID namespace.
            assert v[call] == "refused EPERM" or (outer and v[call] == "refused ESRCH"), (mode, outer, call)
        assert v["renice self"] == v["pin self"] == "allowed", (mode, outer)


@needs_sandbox
def test_no_thread_starts_once_the_gpu_is_open(modes):
    for (mode, outer), v in modes.items():
        assert v["threads started"] == (0 if mode == "accused" else 64), (mode, outer)
        if mode == "accused":
            assert "no new thread once the GPU is open: seccomp" in v["protections"], outer


@needs_sandbox
def test_no_file_is_written_and_no_memory_hides_from_the_limit(modes):
    """The disk cap is the whole folder's (nothing is written), /dev/shm is out of reach, and
    /dev/zero is readable only: a shared map of it (uncounted memory) needs a writable one."""
    for (mode, outer), v in modes.items():
        assert v["write inside"].startswith("refused"), (mode, outer)
        assert v["write /dev/shm"].startswith("refused"), (mode, outer)
        assert v["open /dev/zero for writing"].startswith("refused"), (mode, outer)
        assert v["shared anonymous 12 GiB"] == v["memfd_create"] == "refused EPERM", (mode, outer)


@needs_sandbox
def test_kernel_knobs_and_devices_are_out_of_reach_and_bubblewrap_has_no_init_of_its_own(modes):
    for (mode, outer), v in modes.items():
        for call in ("open kernel.core_pattern for writing", "open /dev/kmsg", "open /dev/userfaultfd"):
            assert v[call].startswith("refused"), (mode, outer, call)
        if outer == "bwrap":  # the sandboxed process is its PID namespace's only process
            assert v["pid"] == 1 and v["processes"] == [1], mode


# The proof gate's launch (runner/one_launch.py under compute-sanitizer, here its stand-in): host
# code an LLM wrote, past the fence, reads a planted secret and tries every way out with it.
HOST_LOOP = r"""
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n) {
    get_out();
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}
"""


@needs_sandbox
@needs_nvcc
@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_the_proof_gates_launch_gets_nothing_out(tmp_path, monkeypatch, mechanism):
    """Issue 46: the launch under compute-sanitizer read the user's files, reached unix,
    abstract and datagram sockets and SysV queues, and had no memory limit. Now it never loads
    the spec and is confined as the accused is; its tool still runs and reports."""
    import dataclasses

    from kernel_lsp.fence.sandbox import bwrap_available

    if mechanism == "bwrap" and bwrap_available(str(tmp_path)):
        pytest.skip(bwrap_available(str(tmp_path)))
    targets = Targets(tmp_path / "targets")
    try:
        monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
        monkeypatch.setenv("HOME", str(targets.home))
        fake_sanitizer = Path(__file__).resolve().parents[1] / "fixtures" / "fake_sanitizer.py"
        monkeypatch.setenv("KERNEL_LSP_COMPUTE_SANITIZER", str(fake_sanitizer))
        path = tmp_path / "probe.cu"
        path.write_text(CANDIDATE)
        spec = tmp_path / "probe.spec.py"
        spec.write_text(PROBE_SPEC)
        hostile = aimed_at(targets, HOST_LOOP)
        with GpuSession(fake=True, timing=FAST, sandboxed=True) as gpu:
            # Built as the user's own (no fence), then marked as an LLM's: as if past the fence.
            build = dataclasses.replace(gpu.build_library(hostile, str(path), OPTIONS), trusted=False)
            assert build.library is not None, build.result.diagnostics
            report = gpu.prove(
                GpuCheckRequest(hostile, str(path), kernel="saxpy", spec=str(spec), artifact=build)
            )
        assert sorted(report.tools) == ["initcheck", "memcheck", "racecheck", "synccheck"], report.note
        assert report.note == "" and not report.blocks_offer, report.note
        assert nothing_got_out(targets) == []
        # The same code unconfined reaches them: the targets do listen.
        unconfined = GpuSession(fake=True, timing=FAST)
        with unconfined as gpu:
            check_file(gpu, str(tmp_path / "probe_plain.cu"), source=hostile, spec_source=PROBE_SPEC)
        got = nothing_got_out(targets)
        assert any(SECRET in g for g in got) and "connect unix path" in got, got
    finally:
        targets.close()


@needs_sandbox
def test_a_thread_a_tool_started_first_is_held_too(hostile, tmp_path):
    """compute-sanitizer starts a thread in the launch before its first line runs (seen on an H100,
    Landlock ABI 7): Landlock, entered later and without TSYNC, leaves it out. In-process the launch
    then refuses to run; inside bubblewrap (the mount namespace holds every thread) it runs, and
    seccomp, which holds every thread, refuses that thread any file write once the GPU is open."""
    import landlockpy

    from kernel_lsp.fence.sandbox import TSYNC_ABI, bwrap_available

    if landlockpy.abi_version() < TSYNC_ABI:
        assert "2 threads run already" in hostile(mode="gate")["enter"]
    if bwrap_available(str(tmp_path)):
        pytest.skip(bwrap_available(str(tmp_path)))
    v = hostile(mode="gate", outer="bwrap")
    assert v["early thread: write inside"] == "refused EPERM"  # the folder is writable to the tool
    assert v["early thread: read home"].startswith("refused")  # not bound
    assert v["early thread: open /dev/null for writing"] == "refused EPERM"
    assert v["early thread: read own status"] == "allowed"
    assert v["write inside"] == "refused EPERM" and v["files"].startswith("bwrap + landlock")
