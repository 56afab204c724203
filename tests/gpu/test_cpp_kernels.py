"""Kernels of real-project files on the GPU: a C++ (mangled) kernel of a host+device file and a
template instance (`kernel="scale<float>"`), compiled by compile_source (nvcc for the host+device
file, NVRTC for the template), verified and timed through `check`, `--check` and `bench`; and
`--check --gpus` spreading files over the GPUs."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.cli.bench import bench_main
from kernel_lsp.compile import CompileOptions
from kernel_lsp.evaluation.pool import visible_gpu_count
from kernel_lsp.gpu import GpuCompareRequest, GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
FILES = ("saxpy_host", "scale_template")


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(timing=TimingSettings(budget_s=0.3)) as session:
        assert session.available, session.reason
        yield session


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in FILES:
        for suffix in (".cu", ".spec.py"):
            shutil.copy(FIXTURES / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path


@pytest.mark.parametrize(("name", "kernel"), [("saxpy_host", "saxpy"), ("scale_template", "scale<float>")])
def test_verified_and_timed_from_the_artifact(gpu, name, kernel):
    path = FIXTURES / f"{name}.cu"
    source = path.read_text()
    artifact = gpu.compile(source, str(path), CompileOptions())
    assert artifact.ok, [d.message for d in artifact.diagnostics]
    assert artifact.arch.rstrip("af") == gpu.device.arch  # the device's exact arch
    [check] = check_file(gpu, str(path), source, artifact=artifact)
    assert check.ok, check.message
    assert check.kernel == kernel
    assert check.timings and check.timings[-1].measurement.median_s > 0
    assert check.device_index == gpu.device_index and check.host


def test_the_other_template_instance_is_not_what_ran(gpu, tmp_path):
    # Point the spec at the double instance with float32 buffers: a different entry runs, and it
    # reads the inputs as doubles, so the check must fail: the name picks the entry.
    for suffix in (".cu", ".spec.py"):
        shutil.copy(FIXTURES / f"scale_template{suffix}", tmp_path / f"scale_template{suffix}")
    spec = tmp_path / "scale_template.spec.py"
    spec.write_text(spec.read_text().replace('kernel="scale<float>"', 'kernel="scale<double>"'))
    [check] = check_file(gpu, str(tmp_path / "scale_template.cu"))
    assert not check.ok


def test_compare_of_a_template_instance_on_one_device(gpu):
    path = FIXTURES / "scale_template.cu"
    source = path.read_text()
    artifact = gpu.compile(source, str(path))
    request = GpuCompareRequest(
        source,
        source,
        str(path),
        kernel="scale<float>",
        baseline_artifact=artifact,
        candidate_artifact=artifact,
    )
    c = gpu.compare(request)
    assert c.error is None, c.error
    assert 0.8 < c.speedup < 1.25 and c.device_index == gpu.device_index


def _check_json(paths: list[str], *flags: str) -> tuple[int, dict]:
    cmd = [sys.executable, "-m", "kernel_lsp", "--check", *paths, "--format", "json", *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    return out.returncode, json.loads(out.stdout)


def _gpu_verdicts(report: dict) -> dict[str, list[tuple[str, str]]]:
    files = report["files"] if isinstance(report, dict) and "files" in report else report
    return {
        Path(f["path"]).name: [(g["kernel"], g["status"]) for g in f.get("gpu", [])]
        for f in files
        if f.get("gpu")
    }


def test_check_verifies_both_files(project):
    code, report = _check_json([str(project)])
    assert code == 0, report
    assert _gpu_verdicts(report) == {
        "saxpy_host.cu": [("saxpy", "ok")],
        "scale_template.cu": [("scale<float>", "ok")],
    }


def test_check_on_all_gpus_equals_one(project):
    code_one, one = _check_json([str(project)], "--gpus", "1")
    code_all, every = _check_json([str(project)], "--gpus", "all")
    assert code_one == code_all == 0
    assert _gpu_verdicts(one) == _gpu_verdicts(every)
    if visible_gpu_count() > 1:
        indices = {g["device_index"] for f in every["files"] for g in f.get("gpu", [])}
        assert len(indices) == 2  # two files, two GPUs


@pytest.mark.parametrize("name", FILES)
def test_bench(name):
    out = io.StringIO()
    code = bench_main([str(FIXTURES / f"{name}.cu"), "--budget", "0.3", "--no-occupancy"], out=out)
    table = out.getvalue()
    assert code == 0, table
    assert "median" in table and ("saxpy" in table or "scale<float>" in table)
