"""A spec's problems are reported without a GPU: at their line in the spec, by --check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fixture_sources import VADD

REPO = Path(__file__).resolve().parents[2]

GOOD_SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b, **_: {"c": a + b},
)
"""


def check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", "--arch", "sm_90", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
        check=False,
    )


def test_good_spec_passes(tmp_path: Path):
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(GOOD_SPEC)
    out = check(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "spec" not in out.stdout.split("checked")[0].lower()


def test_spec_that_raises_is_reported_at_its_line(tmp_path: Path):
    (tmp_path / "vadd.cu").write_text(VADD)
    broken = GOOD_SPEC.replace('    sizes=[{"n": 1}, {"n": 1000}],', '    sizes=[{"n": 1 // 0}],')
    (tmp_path / "vadd.spec.py").write_text(broken)
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout
    line = broken.splitlines().index('    sizes=[{"n": 1 // 0}],') + 1
    assert f"vadd.spec.py:{line}:" in out.stdout and "ZeroDivisionError" in out.stdout, out.stdout


def test_spec_that_disagrees_with_the_signature_is_reported(tmp_path: Path):
    (tmp_path / "vadd.cu").write_text(VADD)
    wrong = GOOD_SPEC.replace('"c": Out("float32")', '"out": Out("float32")')
    (tmp_path / "vadd.spec.py").write_text(wrong)
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout
    findings = [ln for ln in out.stdout.splitlines() if ln.startswith("vadd.spec.py:")]
    assert any("parameter `float* c` has no entry in args" in ln for ln in findings), findings
    assert any("`out` is not a parameter of vadd" in ln for ln in findings), findings


def test_spec_that_never_returns_is_stopped(tmp_path: Path):
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text("while True:\n    pass\n")
    out = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", "--arch", "sm_90", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "KERNEL_LSP_JOB_TIMEOUT_S": "3"},
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "vadd.spec.py:1:1: error: vadd.spec.py did not return within 3 s while vadd.cu was checked"
        in out.stdout
    ), out.stdout


def test_check_no_gpu_fails_on_the_skeleton_as_written(tmp_path: Path):
    from kernel_lsp.skeleton import spec_skeleton
    from kernel_lsp.source import find_kernels, parse_directives

    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(spec_skeleton(find_kernels(VADD)[0], parse_directives(VADD), VADD))
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "dry run on the CPU: the reference is not written yet" in out.stdout
