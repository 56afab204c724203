"""Faults and bad input through `kernel-lsp --check` (issue 23): each gets its verdict and its
message, bounded in time and memory, and leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_inputs import (
    KERNEL,
    MACRO_BOMB,
    MEMORY_BOMB,
    NUL_AFTER_8K,
    NUL_LINE,
    SLEEPING_SPEC,
    alive,
    descendants,
    wait_gone,
)

from kernel_lsp.compile import find_toolchain

pytestmark = pytest.mark.slow  # the slow tier (waits out deadlines and hangs): python -m pytest -m slow

REPO = Path(__file__).resolve().parents[2]
HOST_CODE = "#include <cstdio>\n" + KERNEL + 'int main() { printf("hi\\n"); return 0; }\n'


def run_check(
    cwd: Path, *args: str, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", "--arch", "sm_90", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def test_a_nul_past_the_first_8_kib_is_an_error_at_its_line(tmp_path):
    (tmp_path / "f.cu").write_bytes(NUL_AFTER_8K)
    p = run_check(tmp_path, "f.cu")
    assert p.returncode == 1, p.stdout + p.stderr  # before: 0 errors, exit 0 (NVRTC stopped at the NUL)
    assert f"f.cu:{NUL_LINE}:1: error: not checked: a NUL byte at line {NUL_LINE}" in p.stdout


def test_an_include_of_a_fifo_is_an_error_at_the_include_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "p.cuh")
    (tmp_path / "f.cu").write_text('// first\n#include "p.cuh"\n' + KERNEL)
    os.mkfifo(tmp_path / "lonely.cu")  # a FIFO named like a source file is not opened either
    start = time.monotonic()
    p = run_check(tmp_path, "f.cu", "lonely.cu", timeout=60)  # before: no output after 300 s
    assert time.monotonic() - start < 30
    assert p.returncode == 1, p.stdout + p.stderr
    assert (
        f'f.cu:2:1: error: #include "p.cuh": {tmp_path / "p.cuh"} is a FIFO (named pipe), not a regular file'
        in (p.stdout)
    )
    assert (
        "lonely.cu:1:1: error: not checked: the file is a FIFO (named pipe), not a regular file" in p.stdout
    )


def test_a_spec_that_is_a_fifo_is_a_problem_at_the_spec_not_a_hang(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    os.mkfifo(tmp_path / "k.spec.py")
    p = run_check(tmp_path, "--specs", "run", "k.cu", env={"KERNEL_LSP_JOB_TIMEOUT_S": "20"}, timeout=60)
    assert "k.spec.py:1:1: error: cannot read spec:" in p.stdout and "is a FIFO (named pipe)" in p.stdout, (
        p.stdout
    )
    assert "did not return" not in p.stdout  # read without blocking, not stopped at the deadline


@pytest.mark.parametrize("fifo", ["k.spec.py", "k.cu"])
def test_optimize_says_its_file_or_its_spec_is_a_fifo_in_seconds(tmp_path, fifo):
    """`kernel-lsp optimize` reads the .cu and its spec through the engine's reader (before: a
    FIFO as the spec blocked it for good, and a FIFO as the file was "no such file")."""
    for name in ("k.cu", "k.spec.py"):
        if name == fifo:
            os.mkfifo(tmp_path / name)
        elif name == "k.cu":
            (tmp_path / name).write_text(KERNEL)
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "optimize", "k.cu", "--proposer", "tune", "--rounds", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert time.monotonic() - start < 30
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{tmp_path / fifo} is a FIFO (named pipe), not a regular file" in p.stderr, p.stderr


def test_a_slow_file_without_a_spec_is_not_checked_in_time_not_a_spec_error(tmp_path):
    (tmp_path / "slow.cu").write_text(MACRO_BOMB)
    env = {"KERNEL_LSP_JOB_TIMEOUT_S": "3"}
    p = run_check(tmp_path, "slow.cu", env=env)
    line = (
        "slow.cu:1:1: info: not checked in time (3 s): the compile did not finish; raise checkTimeoutSeconds"
    )
    assert line in p.stdout and "spec" not in p.stdout, p.stdout
    assert p.returncode == 0  # no verdict on the code: not a finding...
    assert run_check(tmp_path, "--strict", "slow.cu", env=env).returncode == 1  # ...but not a pass either
    # The setting, from pyproject.toml, says the same.
    (tmp_path / "pyproject.toml").write_text("[tool.kernel-lsp]\ncheck-timeout-seconds = 2\n")
    assert "not checked in time (2 s)" in run_check(tmp_path, "slow.cu").stdout


def test_the_compile_memory_limit_stops_a_compile_that_would_take_gigabytes(tmp_path):
    (tmp_path / "big.cu").write_text(MEMORY_BOMB)
    p = run_check(tmp_path, "big.cu", env={"KERNEL_LSP_COMPILE_MEMORY_MB": "512"})
    assert "big.cu:1:1: info: not checked: the compiler ran out of memory at its limit of 512 MiB" in p.stdout
    assert "compileMemoryMB" in p.stdout and p.returncode == 0, p.stdout + p.stderr


def test_compile_commands_with_devices_never_block_or_feed_the_compiler(tmp_path):
    (tmp_path / "zero.cu").write_text(KERNEL)
    (tmp_path / "rsp.cu").write_text(KERNEL)
    entries = [
        {"directory": str(tmp_path), "file": "zero.cu", "command": "nvcc -include /dev/zero -c zero.cu"},
        {"directory": str(tmp_path), "file": "rsp.cu", "command": "nvcc @/dev/zero -c rsp.cu"},
    ]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    start = time.monotonic()
    p = run_check(tmp_path, "zero.cu", "rsp.cu", timeout=60)
    assert time.monotonic() - start < 30  # before: cc1plus grew to 24 GB; the database read blocked
    assert (
        "zero.cu:1:1: error: `-include /dev/zero` (from the project's flags) is a character device, "
        "not a regular file" in p.stdout
    ), p.stdout
    assert (
        "rsp.cu:1:1: warning:" in p.stdout
        and "names the response file /dev/zero, which is a character device" in (p.stdout)
    )


def test_a_database_over_its_size_limit_is_one_warning(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    entry = {"directory": str(tmp_path), "file": "k.cu", "command": "nvcc -DX=1 -c k.cu"}
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry] * 200))
    (tmp_path / "pyproject.toml").write_text("[tool.kernel-lsp]\ncompile-commands-max-bytes = 1000\n")
    p = run_check(tmp_path, "k.cu")
    warnings = [ln for ln in p.stdout.splitlines() if "compile_commands.json" in ln]
    assert (
        len(warnings) == 1 and "over the 1000 bytes limit (compileCommandsMaxBytes); not read" in warnings[0]
    )
    assert p.returncode == 0


@pytest.mark.skipif(find_toolchain(()).problem is not None, reason="nvcc backend not installed")
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a private tmpfs")
def test_a_full_temporary_folder_is_named_not_nvccs_host_compiler_message(tmp_path):
    (tmp_path / "host.cu").write_text(HOST_CODE)
    full = tmp_path / "tmp"
    full.mkdir()
    # A private 64 KiB tmpfs, nearly filled: the temporary copy fits, nvcc's own files do not.
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {full} && head -c 40000 /dev/zero > {full}/fill && "
        f"TMPDIR={full} {sys.executable} -m kernel_lsp --check --no-gpu --arch sm_90 host.cu"
    )
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no user namespaces here")
    p = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert p.returncode == 2, p.stdout + p.stderr  # the tool could not run: not a finding
    assert f"kernel-lsp: the temporary folder {full} is full" in p.stderr
    assert "Failed to preprocess host compiler properties" not in p.stdout + p.stderr


def test_killing_the_cli_ends_its_workers_and_what_a_spec_started(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k.spec.py").write_text(SLEEPING_SPEC)
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_lsp",
            "--check",
            "--no-gpu",
            "--arch",
            "sm_90",
            "--specs",
            "run",
            "k.cu",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        pid_file = tmp_path / "sleep.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        sleep_pid = int(pid_file.read_text())
        tree = descendants(cli.pid)
        assert sleep_pid in tree and alive(sleep_pid)
        cli.send_signal(signal.SIGKILL)
        cli.wait(10)
        assert wait_gone(tree, 5.0) == set()  # before: the spec's sleep ran on
    finally:
        if cli.poll() is None:
            cli.kill()
