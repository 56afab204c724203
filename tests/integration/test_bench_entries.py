"""`kernel-lsp bench` on entry specs (`Spec(entry=...)`): the file is built as the shared library
the entry runs, the way `check` and `optimize` build it (through the Workspace, the file's own
settings, `evaluation.backend` included), and the JSON names each kernel the entry launched with
its share of the time where the profile measured it, or why not."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from kernel_lsp.cli.bench import bench_main
from kernel_lsp.compile import find_toolchain
from kernel_lsp.gpu_reports import KernelProfile, ProfileReport
from kernel_lsp.gpu_results import KernelCheck
from kernel_lsp.spec import Spec
from kernel_lsp.workspace import launched_kernels

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = ROOT / "samples" / "entries"
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")

LAUNCHED = {
    "vector_add_bf16": ["vector_add_bf16_kernel"],
    "layernorm_fp32": ["row_mean_kernel", "row_variance_kernel", "normalize_kernel"],
    "l2_normalize_coop": ["l2_normalize_kernel"],
}


def bench_json(path: Path, *flags: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = bench_main([str(path), "--json", "--no-occupancy", "--budget", "0.02", *flags], out=out)
    return code, json.loads(out.getvalue())


@needs_nvcc
@pytest.mark.parametrize("name", sorted(LAUNCHED))
def test_bench_builds_each_sample_entry_as_a_library(name, tmp_path, fake_gpu):
    """The fake GPU runs no kernel, so a sample's check fails on its outputs (or the launch's
    status): past the build, which is what failed before on every entry spec."""
    for f in ENTRIES.glob(f"{name}.*"):
        shutil.copy(f, tmp_path / f.name)
    _, doc = bench_json(tmp_path / f"{name}.cu")
    (check,) = doc["checks"]
    assert check["status"] != "compile_error" and "shared library" not in check["message"], check
    assert check["entry"] is True and name.startswith(check["kernel"])
    assert [k["kernel"] for k in check["kernels"]] == LAUNCHED[name]
    assert all(k["share"] is None for k in check["kernels"]) and "not measured" in check["sharesNote"]


@needs_nvcc
def test_bench_verifies_and_times_an_entry_and_names_its_kernels(tmp_path, fake_gpu):
    """layernorm_fp32's spec over a launcher that does the work on the CPU under the fake GPU and
    launches the sample's three kernels on a real one."""
    shutil.copy(ROOT / "tests" / "fixtures" / "bench_entries" / "layernorm_cpu.cu", tmp_path / "ln.cu")
    spec = (ENTRIES / "layernorm_fp32.spec.py").read_text()
    (tmp_path / "ln.spec.py").write_text(
        spec.replace('{"rows": 4096, "cols": 4096}', '{"rows": 8, "cols": 64}')
    )
    code, doc = bench_json(tmp_path / "ln.cu")
    (check,) = doc["checks"]
    assert code == 0 and check["ok"], check["message"]
    assert check["timings"] and check["timings"][0]["median_s"] > 0
    assert [k["kernel"] for k in check["kernels"]] == LAUNCHED["layernorm_fp32"]
    assert "--no-occupancy" in check["sharesNote"]
    text = io.StringIO()
    assert bench_main([str(tmp_path / "ln.cu"), "--no-occupancy", "--budget", "0.02"], out=text) == 0
    assert (
        "kernels layernorm_fp32 launched: row_mean_kernel, row_variance_kernel, normalize_kernel "
        "(share of the time not measured)" in text.getvalue()
    )


def test_bench_opens_the_backend_the_files_settings_name(tmp_path, monkeypatch):
    """`evaluation.backend` of the file's pyproject.toml (and --backend over it) picks where bench
    runs, as for check and optimize."""
    import kernel_lsp.evaluation.choose as choose

    asked: list[str | None] = []

    def fake_open(kind, *args, **kwargs):
        asked.append(kind)
        raise choose.RayUnavailable("no cluster here")

    monkeypatch.setattr(choose, "open_backends", fake_open)
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\nevaluation.backend = "ray"\n')
    for f in ENTRIES.glob("vector_add_bf16.*"):
        shutil.copy(f, tmp_path / f.name)
    code, doc = bench_json(tmp_path / "vector_add_bf16.cu")
    assert code == 2 and "no cluster here" in doc["error"] and asked == ["ray"]
    bench_json(tmp_path / "vector_add_bf16.cu", "--backend", "local")
    assert asked[-1] == "local"


def _check(profiled: dict[str, float] | None, note: str = "") -> KernelCheck:
    check = KernelCheck("run", "ok", ok=True, timings=[object()])  # type: ignore[list-item]
    if profiled is not None or note:
        check.profile = ProfileReport(
            kernels=[KernelProfile(k, duration_s=t) for k, t in (profiled or {}).items()], note=note
        )
    return check


SOURCE = """
__global__ void a(float* x) {}
__global__ void b(float* x) {}
static void first(float* x, int n) { a<<<n, 1>>>(x); }
extern "C" void run(float* x, int n) { first(x, n); b<<<n, 1>>>(x); }
"""


def test_each_launched_kernel_gets_its_share_where_the_profile_timed_it():
    spec = Spec(entry="run", kernel="run")
    launched, note = launched_kernels(_check({"a(float *)": 3e-6, "b": 1e-6}), spec, SOURCE)
    assert [(k.kernel, k.share) for k in launched] == [("a", 0.75), ("b", 0.25)] and note == ""
    launched, note = launched_kernels(_check(None), spec, SOURCE)
    assert [k.kernel for k in launched] == ["a", "b"] and "did not run" in note
    launched, note = launched_kernels(_check({}, note="ncu is not installed"), spec, SOURCE)
    assert all(k.share is None for k in launched) and note == "not measured: ncu is not installed"
    launched, note = launched_kernels(_check({"a": 1e-6}), spec, SOURCE)
    assert "no time for b" in note


def test_bench_without_a_spec_on_a_launcher_suggests_the_entry_skeleton(tmp_path):
    shutil.copy(ENTRIES / "vector_add_bf16.cu", tmp_path / "v.cu")
    code, doc = bench_json(tmp_path / "v.cu")
    assert code == 2 and "`kernel-lsp spec " in doc["error"] and "--kernel" not in doc["error"]
