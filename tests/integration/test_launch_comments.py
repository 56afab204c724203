"""Launch-comment mistakes are findings at the comment (issue 14, item 5), the same in every front
end: `check_source` makes them, `--check` prints them, the server publishes them."""

from __future__ import annotations

import pytest

from kernel_lsp.check import check_source
from kernel_lsp.cli import main
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

KERNEL = 'extern "C" __global__ void matmul(const float* a, const float* b, float* c, int n, int m) {}\n'
GOOD = "// kernel-lsp: launch matmul grid=(cdiv(n, 16), cdiv(m, 16)) block=(16, 16)\n"
SM90 = Settings(arch=("sm_90",), gpu_enabled=False)


def comment_findings(comment: str, settings: Settings = SM90):
    check = check_source(comment + KERNEL, "mm.cu", settings)
    return [d for d in check.diagnostics if d.code == "launch-comment"], check


@pytest.mark.parametrize(
    ("comment", "severity", "words"),
    [
        (
            "// kernel-lsp: launch matmull grid=(cdiv(n, 16), cdiv(m, 16)) block=(16, 16)\n",
            Severity.WARNING,
            ["`matmull`", "no __global__ function", "did you mean `matmul`?", "kernels: matmul"],
        ),
        (
            "// kernel-lsp: lanch matmul grid=1 block=256\n",
            Severity.WARNING,
            ["unknown kernel-lsp directive `lanch`", "did you mean `launch`?", "launch <kernel> grid="],
        ),
        (
            "// kernel-lsp: launch matmul grid=(cdiv(n, 16), cdiv(m, 16)) block=(16,\n",
            Severity.WARNING,
            ["cannot read block=`(16,`", "expected an expression"],
        ),
        (
            "// kernel-lsp: launch matmul grid=(cdiv(n, 16), cdiv(m, 16)) block=(16,16,8)\n",
            Severity.ERROR,
            ["2048 threads", "sm_90 launches at most 1024 per block"],
        ),
        (
            "// kernel-lsp: launch matmul grid=1 block=(1, 1, 128)\n",
            Severity.ERROR,
            ["128 threads along z", "at most 64"],
        ),
    ],
)
def test_each_mistake_is_a_finding_at_the_comment(comment, severity, words):
    (d,), _ = comment_findings(comment)
    assert (d.line, d.col, d.severity) == (1, 1, severity)
    for w in words:
        assert w in d.message, d.message


def test_a_correct_comment_and_runtime_sizes_are_quiet():
    found, check = comment_findings(GOOD)
    assert found == []
    assert check.kernels[0].occupancy is not None and check.kernels[0].block_size == 256
    # A block size known only from the spec's sizes is checked by the spec's cases, not here.
    assert comment_findings("// kernel-lsp: launch matmul grid=1 block=(bx, by)\n")[0] == []


def test_a_macro_block_over_the_limit_is_caught_too():
    source = "#define BLOCK 2048\n// kernel-lsp: launch matmul grid=1 block=BLOCK\n" + KERNEL
    (d,) = [d for d in check_source(source, "mm.cu", SM90).diagnostics if d.code == "launch-comment"]
    assert d.line == 2 and "2048 threads" in d.message


def test_check_prints_them_and_fails_on_the_block_limit(tmp_path, capsys):
    cu = tmp_path / "mm.cu"
    cu.write_text("// kernel-lsp: launch matmul grid=1 block=(16,16,8)\n" + KERNEL)
    code = main(["check", "-v", str(cu), "--arch", "sm_90", "--no-gpu"])
    out = capsys.readouterr().out
    assert code == 1
    assert "mm.cu:1:1: error: block=`(16,16,8)` is 2048 threads" in out
    # Occupancy says why it is missing, not "no literal block size".
    assert "a block of 2048 threads cannot launch on sm_90" in out
    assert "no literal block size" not in out
