"""Issue 15 on a real GPU with Nsight Compute: the profile of a two-kernel reduction (limiter,
speed of light, stalls, hot lines that are the files' real lines, achieved occupancy of each
kernel), `bench --profile` text of a stencil, the cache, and the tuner's report naming its best
point's limiter. Skipped without a GPU or without ncu. The `PROFILE-GPU ...` lines printed here
are what the closing note quotes (run with `-s`)."""

from __future__ import annotations

import dataclasses
import io
import shutil
import time
from pathlib import Path

import pytest
from fixture_sources import narrow_tune

from kernel_lsp.cli.bench import bench_main
from kernel_lsp.compile import CompileOptions, compile_file
from kernel_lsp.runner.profile import find_ncu

# No lane of their own: the other parts of these tests run beside anything, and ncu's collecting
# runs one at a time on a machine by itself (runner/profile.py's lock).
pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
LIMITERS = {"memory-bound", "compute-bound", "latency-bound", "launch-bound"}
# (sample, spec kernel, the lines the H200 recording (tests/fixtures/ncu) found hottest). One live
# run (each costs 10-30 s of ncu); the limiter of the stencil and the GEMM is tested on the
# recordings (tests/integration/test_profile.py).
SAMPLES = [
    ("reduce_sum/reduce_sum_fp32.cu", "reduce_sum", {35, 63}),
]


@pytest.fixture(scope="module")
def gpu():
    from kernel_lsp.gpu import GpuSession

    if find_ncu() is None:
        pytest.skip("no Nsight Compute (ncu) here")
    session = GpuSession()
    if not session.available:
        pytest.skip(f"no GPU: {session.reason}")
    yield session
    session.close()


@pytest.mark.long(28)
@pytest.mark.parametrize(("rel", "kernel", "hottest"), SAMPLES)
def test_profile_of_a_sample(gpu, rel, kernel, hottest):
    from kernel_lsp.gpu import GpuCheckRequest
    from kernel_lsp.profile_text import profile_lines
    from kernel_lsp.spec import load_specs, spec_path_for

    path = REPO / "samples" / rel
    source = path.read_text()
    loaded = load_specs(spec_path_for(str(path)))
    request = GpuCheckRequest(source, str(path), kernel=kernel, spec=loaded)
    check = gpu.check(request)
    assert check.ok, check.message
    t0 = time.perf_counter()
    gpu.add_occupancy(check, request)
    first_s = time.perf_counter() - t0
    report = check.profile
    assert report is not None and report.kernels, report and report.note
    assert report.missing == [], report.missing
    for k in report.kernels:
        assert k.limiter in LIMITERS and k.evidence and k.sol and k.stalls
    lines = source.splitlines()
    for h in report.hot_lines:
        assert h.path == str(path)
        assert h.text == lines[h.line - 1].strip()  # the mapping lands on the real line
    top = {h.line for h in report.hot_lines[:2]}
    assert top & hottest, (top, hottest)
    # Achieved occupancy of every kernel of the pipeline, on the timed case: ncu's theoretical
    # figure is ours (same limits), and achieved can only be lower.
    compiled = {
        k.name: k.occupancy for k in compile_file(str(path), CompileOptions(arch=gpu.device.arch)).kernels
    }
    assert sorted(o.kernel for o in check.occupancy) == sorted(compiled), check.occupancy_note
    for o in check.occupancy:
        assert o.case == check.timings[-1].case
        assert o.theoretical == pytest.approx(compiled[o.kernel].fraction, abs=0.01), o
        assert 0.0 < o.achieved <= o.theoretical + 0.02, o
    # Cached per source version: a second check of it (its verdict copied: verifying again
    # costs seconds and tells nothing here) does not run ncu again.
    again = dataclasses.replace(check, profile=None, occupancy=[])
    t0 = time.perf_counter()
    gpu.add_occupancy(again, request)
    assert again.profile is report and time.perf_counter() - t0 < min(1.0, first_s)
    print(
        f"\nPROFILE-GPU {rel} {report.kernels[0].kernel}: {report.kernels[0].headline} | profiling run {report.wall_s:.1f} s"
    )
    print("\n".join("PROFILE-GPU   " + line for line in profile_lines(report)))


@pytest.mark.long(26)
def test_bench_profile_text_and_json():
    if find_ncu() is None:
        pytest.skip("no Nsight Compute (ncu) here")
    path = str(REPO / "samples" / "stencil2d" / "stencil2d_fp32.cu")
    out = io.StringIO()
    assert bench_main([path, "--profile", "--budget", "0.2"], out=out) == 0
    text = out.getvalue()
    assert "profile stencil2d: " in text and "top stalls:" in text and "line 39:" in text, text


@pytest.mark.long(39)
def test_tuner_report_names_the_limiter_of_its_best_point(gpu, tmp_path):
    from kernel_lsp.config import Settings
    from kernel_lsp.optimizer.session import RunRequest, run

    shutil.copytree(REPO / "samples" / "reduce_sum", tmp_path / "reduce_sum")
    path = tmp_path / "reduce_sum" / "reduce_sum_fp32.cu"
    # Two tuned points beside the written one, searched to the end (no time budget, which the
    # profiles would eat into when the GPU is shared): ITEMS=2 is the fastest on H100 and H200.
    narrow_tune(path, "BLOCK=256 ITEMS=1,2,4 VEC=1")
    req = RunRequest(
        path=str(path),
        kernel="reduce_sum",
        settings=Settings(),
        proposer="tune",
        use_cache=False,
        workspace=str(tmp_path),
    )
    result = run(req, session=gpu)
    assert result.baseline.profile is not None and result.baseline.profile.kernels
    assert "- ncu profile (" in result.features and "hottest source lines" in result.features
    assert result.best is not None, result.stop_reason
    assert result.best.profile and result.best.profile.kernels
    md = Path(result.report_paths[1]).read_text()
    assert "| limiter (ncu) |" in md and "## What limits them (Nsight Compute)" in md
    row = next(line for line in md.splitlines() if line.startswith("| limiter (ncu) |"))
    print(f"\nPROFILE-GPU tuner reduce_sum: {row}")
