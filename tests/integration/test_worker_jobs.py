"""What the server's compile workers return: findings and resources, without the CUBINs and
logs the server never uses (they were copied through a pipe and kept for every file), NVRTC's
errors first while nvcc decides; how many workers a machine gets."""

from __future__ import annotations

import os

import pytest
from fixture_sources import VADD

from kernel_lsp.check_jobs import check_job, default_workers, files_job
from kernel_lsp.compile import find_toolchain
from kernel_lsp.compile.jobs import WorkerPool
from kernel_lsp.config import Settings
from kernel_lsp.workspace import CheckRequest, Workspace

WORKSPACE = Workspace.fixed(Settings(arch=("sm_90",)))


def test_a_check_comes_back_without_cubin_or_log(tmp_path):
    path = tmp_path / "vadd.cu"
    path.write_text(VADD)
    on_disk = CheckRequest(str(path), trigger="files", gpu_arch="sm_90")
    for check in (check_job(CheckRequest(str(path), VADD), WORKSPACE), files_job(on_disk, WORKSPACE)[0]):
        assert check.errors == 0 and [k.name for k in check.kernels] == ["vadd"]
        assert check.kernels[0].registers > 0
        assert all(r.cubin is None and r.log == "" for r in check.results)


def test_workers_follow_the_cores_and_stay_few():
    n = default_workers()
    assert 1 <= n <= min(4, os.cpu_count() or 1)


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
def test_nvrtcs_errors_come_first_from_the_job_and_nvccs_verdict_after(tmp_path):
    """The two phases of a file NVRTC answers for, from one job: NVRTC's error as a preview (the
    editor shows it at once), then nvcc's verdict on the same text as the job's result."""
    path = tmp_path / "typo.cu"
    text = "__global__ void k(float* x) { x[threadIdx.x] = y; }\n"
    path.write_text(text)
    pool = WorkerPool(1)
    seen: list = []
    try:
        future = pool.submit(check_job, (CheckRequest(str(path), text), WORKSPACE), 120, 0, seen.append)
        check = future.result(timeout=180)
    finally:
        pool.close()
    (preview,) = seen  # the pool calls back before it sets the result
    assert preview.compiler == "nvrtc" and [d.line for d in preview.diagnostics] == [1]
    assert [r.compiler for r in check.results] == ["nvcc"]
    (error,) = check.diagnostics
    assert (error.line, error.source, error.message) == (1, "nvcc", 'identifier "y" is undefined')
