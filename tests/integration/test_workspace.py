"""The Workspace is the one front door: `--check`, `bench`, `optimize` and the server build the
same compile options for the same file (pyproject.toml and compile_commands.json included), and
each finds the project the way the CLI always did: from the file upward."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from kernel_lsp.cli.bench import bench_main
from kernel_lsp.cli.check import check_main
from kernel_lsp.cli.optimize import optimize_main
from kernel_lsp.compile import CompileOptions
from kernel_lsp.config import Settings
from kernel_lsp.workspace import CheckRequest, Workspace

KERNEL = """\
#include "op.cuh"
// kernel-lsp: launch scale grid=cdiv(n, 256) block=256
__global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = OP(x[i]) * FROM_PYPROJECT * FROM_DB;
}
"""

SPEC = """\
from kernel_lsp.spec import InOut, Scalar, Spec
SPEC = Spec(
    kernel="scale",
    sizes=[{"n": 100}],
    args={"x": InOut("float32"), "n": Scalar("int32")},
    reference=lambda x: {"x": x * 6},
)
"""


def project(root: Path) -> Path:
    """src/scale.cu whose header comes from the database's -I and whose macros come from
    pyproject.toml and from compile_commands.json in build/ one level above src/."""
    (root / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["FROM_PYPROJECT=2"]\n')
    (root / "dbinc").mkdir()
    (root / "dbinc" / "op.cuh").write_text("#define OP(v) (v)\n")
    src = root / "src"
    src.mkdir()
    cu = src / "scale.cu"
    cu.write_text(KERNEL)
    (root / "build").mkdir()
    entry = {
        "directory": str(root / "build"),
        "file": str(cu),
        "arguments": ["nvcc", f"-I{root / 'dbinc'}", "-DFROM_DB=3", "-c", str(cu), "-o", "scale.o"],
    }
    (root / "build" / "compile_commands.json").write_text(json.dumps([entry]))
    return cu


@pytest.fixture
def recorded(monkeypatch):
    """Every CompileOptions any front end builds (they all go through Settings.compile_options)."""
    seen: list[CompileOptions] = []
    real = Settings.compile_options

    def spy(self, *args, **kwargs):
        options = real(self, *args, **kwargs)
        seen.append(options)
        return options

    monkeypatch.setattr(Settings, "compile_options", spy)
    return seen


def _what_matters(options: CompileOptions) -> CompileOptions:
    return replace(options, arch="-")  # each front end's arch: the settings' or the device's


def capture_evaluator(path, spec, options, spec_source, specs):
    """The optimizer's evaluator seam (optimizer/evaluator.INJECTED): optimize's options reach the
    evaluator; stop there."""
    raise SystemExit(f"options {options!r}")


class InProcessPool:
    """compile.jobs.WorkerPool's shape, each job run at once in this process."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def submit(self, fn, args, timeout_s, memory_bytes=0, on_preview=None, background=False):
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def close(self) -> None:
        pass


def test_check_bench_optimize_and_server_compile_a_file_with_the_same_options(
    tmp_path, monkeypatch, recorded, capsys
):
    cu = project(tmp_path)
    monkeypatch.chdir(tmp_path / "src")
    # --check runs each file's job in a worker process, out of the spy's sight: here, in process.
    monkeypatch.setattr("kernel_lsp.scheduler.WorkerPool", InProcessPool)

    assert check_main([str(cu), "--no-gpu", "--arch", "sm_90"]) == 0, capsys.readouterr()
    by_check = {_what_matters(o) for o in recorded}
    assert len(by_check) == 1
    [options] = by_check
    assert str(tmp_path / "dbinc") in options.include_dirs
    assert set(options.defines) >= {"FROM_PYPROJECT=2", "FROM_DB=3"}

    # A file with a spec: bench and optimize load it in a worker process too.
    (cu.parent / "scale.spec.py").write_text(SPEC)
    recorded.clear()
    monkeypatch.setattr("kernel_lsp.evaluation.local.FAKE_GPU_DEFAULT", True)  # the fake GPU
    bench_main([str(cu), "--no-occupancy", "--budget", "0.01"])
    assert {_what_matters(o) for o in recorded} == by_check

    recorded.clear()
    monkeypatch.setattr("kernel_lsp.optimizer.evaluator.INJECTED", capture_evaluator)
    with pytest.raises(SystemExit, match="options"):
        optimize_main([str(cu), "--proposer", "tune", "--quiet"])
    assert {_what_matters(o) for o in recorded} == by_check

    from kernel_lsp.check_jobs import check_job
    from kernel_lsp.server.app import KernelLanguageServer

    recorded.clear()
    server = KernelLanguageServer()
    server.apply_settings({"arch": ["sm_90"]}, "test")  # no workspace folder: a file opened alone
    check = check_job(CheckRequest(str(cu)), server.engine)
    assert check.errors == 0, check.diagnostics
    assert {_what_matters(o) for o in recorded} == by_check


def test_a_file_finds_its_own_pyproject_and_the_database_above_the_workspace_root(tmp_path):
    cu = project(tmp_path)
    # The editor opened src/ as its root: the database and pyproject.toml are above it.
    engine = Workspace({}, root=str(tmp_path / "src"))
    options = engine.compile_options(str(cu), "sm_90")
    assert "FROM_DB=3" in options.defines and "FROM_PYPROJECT=2" in options.defines
    assert engine.analyze(str(cu)).errors == 0
    # A subproject's pyproject.toml holds for its files, not for the files beside it.
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["SUB=1"]\n')
    assert "SUB=1" in engine.settings_for(str(sub / "k.cu")).defines
    assert "SUB=1" not in engine.settings_for(str(cu)).defines


def test_the_front_ends_settings_win_over_pyproject_and_the_settings_follow_its_edits(tmp_path):
    cu = project(tmp_path)
    engine = Workspace({"defines": ["FROM_EDITOR=1"]})
    assert engine.settings_for(str(cu)).defines == ("FROM_EDITOR=1",)
    plain = Workspace({})
    assert plain.settings_for(str(cu)).defines == ("FROM_PYPROJECT=2",)
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["CHANGED=1"]\n')
    os.utime(tmp_path / "pyproject.toml", ns=(1, 1))  # a new stamp even within the same tick
    assert plain.settings_for(str(cu)).defines == ("CHANGED=1",)


def test_a_repository_cannot_choose_where_the_key_goes_or_which_cluster_runs_its_code(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.kernel-lsp]\n"
        '"llm.baseUrl" = "https://attacker.example/v1"\n'
        '"cluster.address" = "attacker.example:6379"\n'
        'arch = ["sm_80"]\n'
    )
    engine = Workspace({})
    settings = engine.settings_for(str(tmp_path / "k.cu"))
    assert settings.llm_base_url is None and settings.cluster_address is None
    assert settings.arch == ("sm_80",)  # the project's own keys still hold
    problems = " ".join(engine.problems(str(tmp_path / "k.cu")))
    assert "llm.baseUrl" in problems and "cluster.address" in problems


def test_a_workspace_travels_to_worker_processes_without_its_cache(tmp_path):
    import pickle

    cu = project(tmp_path)
    engine = Workspace({"llm.apiKey": "sk-secret"}, root=str(tmp_path))
    engine.settings_for(str(cu))
    copy = pickle.loads(pickle.dumps(engine))
    assert copy.settings_for(str(cu)) == engine.settings_for(str(cu))
    assert "sk-secret" not in repr(engine)
