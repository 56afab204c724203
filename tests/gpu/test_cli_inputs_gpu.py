"""`--check` on a GPU for the inputs of issue 14: a file with a UTF-8 BOM and a Latin-1 comment
verifies (the GPU path reads the text the compile check read); `unverified` is empty when the
GPU ran and says `--no-gpu` when it did not; a `kernel-lsp spec` skeleton for a 2-D matmul, with
only its reference filled in, verifies on the GPU (its shapes are right)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kernel_lsp.cli import main

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
MATMUL = textwrap.dedent(
    """\
    // kernel-lsp: launch matmul grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16)
    __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
      int row = blockIdx.y * blockDim.y + threadIdx.y;
      int col = blockIdx.x * blockDim.x + threadIdx.x;
      if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
      }
    }
    """
)


def check_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["--check", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


def test_bom_and_latin1_file_verifies_on_the_gpu(capsys, tmp_path):
    source = (FIXTURES / "good.cu").read_bytes()
    (tmp_path / "vadd.cu").write_bytes(b"\xef\xbb\xbf// caf\xe9\n" + source)
    (tmp_path / "vadd.spec.py").write_text((FIXTURES / "vadd.spec.py").read_text())
    code, report = check_json(capsys, str(tmp_path / "vadd.cu"))
    (f,) = report["files"]
    assert code == 0, f
    assert [g["ok"] for g in f["gpu"]] == [True], f["gpu"]
    assert f["unverified"] is None and report["summary"]["unverified"] == 0
    assert [d["code"] for d in f["diagnostics"]] == ["not-utf8"]
    code, report = check_json(capsys, "--no-gpu", str(tmp_path / "vadd.cu"))
    assert report["files"][0]["unverified"] == "--no-gpu" and report["files"][0]["gpu"] == []


def test_matmul_skeleton_with_its_reference_filled_in_verifies(capsys, tmp_path):
    cu = tmp_path / "matmul.cu"
    cu.write_text(MATMUL)
    assert main(["spec", str(cu)]) == 0
    spec = tmp_path / "matmul.spec.py"
    text = spec.read_text()
    stub = '    raise NotImplementedError("write the numpy reference")'
    assert stub in text
    spec.write_text(
        text.replace(stub, '    return {"C": A @ B}').replace(
            'Out("float32"', 'Out("float32", rtol=1e-4, atol=1e-4'
        )
    )
    capsys.readouterr()
    code, report = check_json(capsys, str(cu))
    (f,) = report["files"]
    assert code == 0 and [g["ok"] for g in f["gpu"]] == [True], f
