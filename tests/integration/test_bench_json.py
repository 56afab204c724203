"""`kernel-lsp bench --json` prints one JSON document on stdout and nothing else: a failed check is
in the document, and when nothing could run the document says why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fixture_sources import VADD

# `python -m kernel_lsp` on the fake GPU: kernel-lsp reads no setting that selects it.
ON_FAKE_GPU = str(Path(__file__).resolve().parents[1] / "kernel_lsp_on_fake_gpu.py")

SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 10}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b: {"c": a + b},
)
"""


def bench(folder: Path, *args: str, fake: bool = True) -> subprocess.CompletedProcess:
    kernel_lsp = [ON_FAKE_GPU] if fake else ["-m", "kernel_lsp"]
    return subprocess.run(
        [sys.executable, *kernel_lsp, "bench", "--json", "--no-occupancy", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
        check=False,
    )


def test_a_failed_check_is_only_in_the_json(tmp_path):
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    # The fake GPU cannot load a real CUBIN: the check fails, as a kernel that fails would.
    out = bench(tmp_path, "vadd.cu")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)  # the whole of stdout is one document
    (check,) = doc["checks"]
    assert check["kernel"] == "vadd" and check["ok"] is False and check["message"]


def test_nothing_to_run_is_a_json_error_too(tmp_path):
    (tmp_path / "vadd.cu").write_text(VADD)
    out = bench(tmp_path, "vadd.cu")  # no spec beside it
    assert out.returncode == 2
    doc = json.loads(out.stdout)
    assert doc["checks"] == [] and "no spec" in doc["error"]
    assert "no spec" in out.stderr
