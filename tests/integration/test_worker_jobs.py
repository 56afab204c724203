"""What the server's compile workers return: findings and resources, without the CUBINs and
logs the server never uses (they were copied through a pipe and kept for every file); how many
workers a machine gets."""

from __future__ import annotations

import os

from fixture_sources import VADD

from kernel_lsp.check_jobs import check_job, default_workers, lean_analyze
from kernel_lsp.config import Settings
from kernel_lsp.workspace import CheckRequest, Workspace

WORKSPACE = Workspace.fixed(Settings(arch=("sm_90",)))


def test_a_check_comes_back_without_cubin_or_log(tmp_path):
    path = tmp_path / "vadd.cu"
    path.write_text(VADD)
    for check in (check_job(CheckRequest(str(path), VADD), WORKSPACE), lean_analyze(WORKSPACE, str(path))):
        assert check.errors == 0 and [k.name for k in check.kernels] == ["vadd"]
        assert check.kernels[0].registers > 0
        assert all(r.cubin is None and r.log == "" for r in check.results)


def test_workers_follow_the_cores_and_stay_few():
    n = default_workers()
    assert 1 <= n <= min(4, os.cpu_count() or 1)
