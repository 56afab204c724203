"""The sandbox around host code an LLM wrote, proven on the CPU: a sandboxed process cannot write
outside its folder, open a network socket or start a program; a sandboxed GPU worker (fake GPU)
runs a launcher that tries both and finds them refused; code that is not the user's runs only in
a sandboxed worker; and a worker that cannot sandbox itself refuses to run anything (fail closed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import SandboxUnavailable, enter_sandbox, in_process_available
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.runner.protocol import read_message, write_message
from kernel_lsp.runner.timing import TimingSettings

needs_sandbox = pytest.mark.skipif(
    in_process_available() is not None, reason=f"no Landlock/seccomp here: {in_process_available()}"
)
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
FAST = TimingSettings(warmup_s=0.0, budget_s=0.01, min_samples=5, max_samples=5)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())

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
    assert lines["write inside"] == "allowed"
    assert lines["unix socket"] == "allowed"
    for refused in (
        "write outside",
        "mkdir outside",
        "tcp socket",
        "udp socket",
        "exec",
        "fork",
        "big allocation",
    ):
        assert lines[refused] == "refused", proc.stdout
    assert not outside.exists() and (folder / "ok").exists()
    assert "landlock" in proc.stdout and "seccomp" in proc.stdout and "RLIMIT_DATA" in proc.stdout


def test_no_mechanism_means_no_sandbox(monkeypatch):
    import kernel_lsp.fence.sandbox as sandbox

    def broken(*args):
        raise OSError("not here")

    for name in ("restrict_writes", "restrict_syscalls", "new_network_namespace"):
        monkeypatch.setattr(sandbox, name, broken)
    with pytest.raises(SandboxUnavailable) as e:
        enter_sandbox("/tmp")
    assert "cannot confine file writes and network" in str(e.value)
    assert "landlock: OSError: not here" in str(e.value) and "seccomp" in str(e.value)


def test_a_worker_that_cannot_sandbox_itself_runs_nothing(tmp_path):
    # A folder that does not exist: Landlock cannot grant it, so writes cannot be confined.
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp.runner.worker", "--fake", "--sandbox", str(tmp_path / "missing")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        write_message(proc.stdin, {"op": "hello"})
        reply, _ = read_message(proc.stdout)
        assert reply["available"] is False
        assert "cannot confine file writes" in reply["sandbox_error"]
        write_message(proc.stdin, {"op": "check"})
        refused, _ = read_message(proc.stdout)
        assert refused["event"] == "error" and "no sandbox" in refused["message"]
    finally:
        proc.kill()
        proc.wait()


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
        check = gpu.check(CANDIDATE, str(path), str(tmp_path / "probe.spec.py"), "saxpy", build)
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
    command, clean = sandboxed_command(["python", "-m", "kernel_lsp.runner.worker"], env, str(tmp_path))
    assert "OPENAI_API_KEY" not in clean and clean["HOME"] == str(tmp_path) and clean["PATH"] == "/usr/bin"
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
    inside, env = tool_command(tool, {"steps": [entry]}, str(tmp_path))
    assert inside == trusted_cmd  # the launch confines itself once the tool has started it
    assert "OPENAI_API_KEY" not in env and env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["PYTHONPATH"] == trusted_env["PYTHONPATH"]
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
    from pathlib import Path

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
        check = gpu.check(candidate, str(path), spec, "saxpy", build)
        assert check.ok, check.message
        assert gpu.backend.sandbox["files"].startswith("bwrap") is (mechanism == "bwrap")
        assert gpu.backend._sandbox_kind() == ("bwrap" if mechanism == "bwrap" else "")
        report = gpu.prove(candidate, str(path), spec, "saxpy", build)
    assert report.note == "" and report.findings == [], report.note
    assert sorted(report.tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]
