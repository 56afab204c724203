"""The small things a new user meets first (issue 25): bare `kernel-lsp` in a terminal says what
it is and keeps serving, every command's --help is whole, `bench` without a spec says which
`kernel-lsp spec` command writes one."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_lsp.cli import bench, check, main, spec
from kernel_lsp.cli.flags import doc_description
from kernel_lsp.cli.serve import TERMINAL_HINT

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def _read_until(fd: int, wanted: str, timeout_s: float) -> str:
    seen = ""
    end = time.monotonic() + timeout_s
    while wanted not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


def test_bare_kernel_lsp_in_a_terminal_prints_a_hint_and_keeps_serving():
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    os.close(follower)
    try:
        err = _read_until(proc.stderr.fileno(), TERMINAL_HINT, 60)
        assert TERMINAL_HINT in err, err
        assert TERMINAL_HINT == (
            "kernel-lsp: LSP server on stdio; editors start it. "
            "For the command line: kernel-lsp check PATH... (kernel-lsp --help)"
        )
        time.sleep(1.0)
        assert proc.poll() is None  # still serving, as clangd does
    finally:
        proc.kill()
        proc.wait(10)
        os.close(leader)


def test_an_editor_on_a_pipe_gets_no_hint():
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        time.sleep(3.0)
        assert proc.poll() is None
    finally:
        proc.stdin.close()  # end of input: the server ends
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert TERMINAL_HINT.encode() not in err


def help_text(capsys, argv: list[str]) -> tuple[int, str]:
    """The exit code and stdout of `kernel-lsp ARGV` (sub-commands return argparse's exit code,
    the server's parser raises it)."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "doc"),
    [
        (["check", "--help"], None),
        (["--check", "--help"], None),
        (["spec", "--help"], spec.__doc__),
        (["bench", "--help"], bench.__doc__),
        (["optimize", "--help"], None),
        (["--help"], None),
    ],
)
def test_every_commands_help_is_whole(capsys, argv, doc):
    code, out = help_text(capsys, argv)
    assert code == 0
    flat = " ".join(out.split())
    if doc is not None:  # the module's whole first paragraph, not its first line
        assert doc_description(doc) in flat
        assert doc_description(doc).endswith(".")
    # The description (between usage and the arguments) ends a sentence.
    description = out.split("\n\n")[1]
    assert description.rstrip().endswith("."), description


def test_the_check_help_names_its_alias_and_the_codes():
    text = " ".join(check.DESCRIPTION.split())
    assert "kernel-lsp --check PATH... is the same command" in text.replace("`", "")
    assert "#pragma nv_diag_suppress 177" in check.EPILOG


def test_spec_help_is_not_cut_mid_sentence(capsys):
    out = " ".join(help_text(capsys, ["spec", "--help"])[1].split())
    assert "Never overwrites a spec without --force." in out


def test_bench_without_a_spec_suggests_the_spec_command(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("one.cu").write_text("__global__ void scale(float* x) { x[0] = 1.0f; }\n")
    assert main(["bench", "one.cu"]) == 2
    err = capsys.readouterr().err
    assert "`kernel-lsp spec one.cu --kernel scale`" in err, err
    Path("two.cu").write_text("__global__ void a(float* x) {}\n__global__ void b(float* x) {}\n")
    assert main(["bench", "two.cu"]) == 2
    err = capsys.readouterr().err
    assert "`kernel-lsp spec two.cu --kernel K`" in err and "(kernels: a, b)" in err, err
    assert main(["bench", "two.cu", "--kernel", "b"]) == 2
    assert "`kernel-lsp spec two.cu --kernel b`" in capsys.readouterr().err
