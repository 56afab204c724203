"""Which CUDA a check used (issue 33): NVRTC's version and nvcc's, in `kernel-lsp --version`, the
`check` summary line and the JSON and SARIF reports; each compared with what the compilers
themselves say (nvrtcVersion, `nvcc --version`), and an nvcc under CUDA_HOME named as that one."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sarif_shape import sarif_problems

from kernel_lsp.cli import main
from kernel_lsp.compile import find_toolchain
from kernel_lsp.compile.versions import cuda_versions, nvcc_version
from kernel_lsp.model import CudaVersions
from kernel_lsp.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")
CLEAN = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


def nvrtc_says() -> str:
    """nvrtcVersion, asked here directly."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def nvcc_says(nvcc: str) -> str:
    """The `V13.5.37` of `nvcc --version`, read here on its own."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    (found,) = re.findall(r", V([\d.]+)", out)
    return found


def fake_toolkit(root: Path, release: str) -> Path:
    """A CUDA_HOME whose bin/nvcc says it is `release` (e.g. 12.9.86), as a CUDA 12 toolkit's does."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    major_minor = ".".join(release.split(".")[:2])
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {major_minor}, V{release}'\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


@needs_nvcc
def test_versions_are_what_nvrtc_and_nvcc_say():
    assert TOOLCHAIN.nvcc is not None
    versions = cuda_versions()
    assert versions.nvrtc == nvrtc_says()
    assert versions.nvcc == nvcc_says(TOOLCHAIN.nvcc)
    assert versions.nvcc_path == TOOLCHAIN.nvcc and versions.nvcc_from == TOOLCHAIN.nvcc_from


def test_an_nvcc_under_cuda_home_is_the_one_named(tmp_path, monkeypatch):
    nvcc = fake_toolkit(tmp_path / "cuda-12.9", "12.9.86")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-12.9"))
    versions = cuda_versions()
    assert (versions.nvcc, versions.nvcc_path, versions.nvcc_from) == ("12.9.86", str(nvcc), "CUDA_HOME")
    assert Workspace.cuda_versions() == versions  # what the front ends ask: the front door's
    assert versions.summary().endswith("nvcc 12.9.86")
    assert f"nvcc 12.9.86: {nvcc} (from CUDA_HOME/CUDA_PATH)" in versions.describe()


@pytest.mark.parametrize("var", ["CUDA_HOME", "CUDA_PATH"])
def test_a_cuda_home_without_nvcc_is_an_error_that_says_so(tmp_path, monkeypatch, capsys, var):
    """A toolkit folder without bin/nvcc (a runtime-only install, a typo) is never replaced by the
    wheel's CUDA 13 unnoticed: every file nvcc would compile gets the error naming the variable,
    and --version and the summary say it."""
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    (tmp_path / "cuda-12" / "include").mkdir(parents=True)
    monkeypatch.setenv(var, str(tmp_path / "cuda-12"))
    toolchain = find_toolchain()
    assert toolchain.nvcc is None and toolchain.problem is not None
    assert toolchain.problem.startswith(f"{var}={tmp_path / 'cuda-12'} has no executable ")
    assert "bin/nvcc" in toolchain.problem
    versions = cuda_versions()
    assert versions.nvcc_path is None and f"nvcc: {var}=" in versions.describe()
    assert versions.to_dict()["nvccProblem"] == toolchain.problem

    (tmp_path / "k.cu").write_text(CLEAN)
    code = main(["check", "--no-gpu", "--arch", "sm_90", "--compiler", "nvcc", str(tmp_path / "k.cu")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"{var}={tmp_path / 'cuda-12'} has no executable" in out.splitlines()[0]
    assert f"no nvcc ({var}=" in out.splitlines()[-1]

    monkeypatch.setenv(var, str(tmp_path / "absent"))
    assert f"{var}={tmp_path / 'absent'} is no folder" in (find_toolchain().problem or "")


def test_an_nvcc_that_says_nothing_has_no_version(tmp_path):
    silent = tmp_path / "nvcc"
    silent.write_text("#!/bin/sh\nexit 3\n")
    silent.chmod(0o755)
    assert nvcc_version(str(silent)) is None
    assert nvcc_version(str(tmp_path / "absent")) is None
    assert CudaVersions("13.5", None, str(silent), "PATH").summary() == "CUDA: NVRTC 13.5, nvcc ?"
    assert CudaVersions("13.5", None).summary() == "CUDA: NVRTC 13.5, no nvcc"


@needs_nvcc
def test_version_flag_names_kernel_lsp_nvrtc_and_nvcc():
    assert TOOLCHAIN.nvcc is not None
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, nvrtc, nvcc = done.stdout.splitlines()
    assert first.startswith("kernel-lsp ")
    assert nvrtc == f"NVRTC {nvrtc_says()}"
    assert nvcc.startswith(f"nvcc {nvcc_says(TOOLCHAIN.nvcc)}: {TOOLCHAIN.nvcc}")


@needs_nvcc
def test_summary_json_and_sarif_name_the_cuda_used(tmp_path, capsys):
    assert TOOLCHAIN.nvcc is not None
    (tmp_path / "k.cu").write_text(CLEAN)
    expected = f"CUDA: NVRTC {nvrtc_says()}, nvcc {nvcc_says(TOOLCHAIN.nvcc)}"
    assert main(["check", "--no-gpu", "--arch", "sm_90", str(tmp_path)]) == 0
    (summary,) = capsys.readouterr().out.splitlines()
    assert summary.startswith(
        "checked 1 file(s) for sm_90: 0 error(s), 0 warning(s), 1 kernel(s); " + expected
    )

    assert main(["check", "--no-gpu", "--arch", "sm_90", "--format", "json", str(tmp_path)]) == 0
    cuda = json.loads(capsys.readouterr().out)["cuda"]
    assert cuda == {
        "nvrtc": nvrtc_says(),
        "nvcc": nvcc_says(TOOLCHAIN.nvcc),
        "nvccPath": TOOLCHAIN.nvcc,
        "nvccFrom": TOOLCHAIN.nvcc_from,
    }

    assert main(["check", "--no-gpu", "--arch", "sm_90", "--format", "sarif", str(tmp_path)]) == 0
    log = json.loads(capsys.readouterr().out)
    assert sarif_problems(log) == []
    assert log["runs"][0]["properties"]["cuda"] == cuda


def test_the_summary_names_the_archs_the_database_builds_not_the_default(tmp_path, capsys):
    """A file whose compile_commands.json builds sm_80 and sm_86 is checked for those; the summary
    names them, not the default (sm_90 here) beside them."""
    (tmp_path / "k.cu").write_text(CLEAN)
    command = "nvcc -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -c k.cu"
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "k.cu", "command": command}])
    )
    assert main(["check", "--no-gpu", str(tmp_path / "k.cu")]) == 0
    (summary,) = capsys.readouterr().out.splitlines()
    assert summary.startswith("checked 1 file(s) for sm_80, sm_86: 0 error(s)"), summary
    assert main(["check", "--no-gpu", "--format", "json", str(tmp_path / "k.cu")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["archs"] == ["sm_80", "sm_86"]
    assert {k["arch"] for k in data["files"][0]["kernels"]} == {"sm_80", "sm_86"}


def test_watch_names_the_archs_it_checks_for_and_the_cuda(tmp_path):
    """`check --watch`'s first report: the archs of the project's database (not the default list
    the watch started from), then the CUDA used."""
    import io

    from kernel_lsp.cli.watch import _WatchSession
    from kernel_lsp.config import Settings

    (tmp_path / "k.cu").write_text(CLEAN)
    command = "nvcc -arch=sm_80 -c k.cu"
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "k.cu", "command": command}])
    )
    out = io.StringIO()
    session = _WatchSession([str(tmp_path)], Workspace.fixed(Settings(gpu_enabled=False)), "text", out)
    try:
        session.first_run()
    finally:
        session.close()
    summary = out.getvalue().splitlines()[-1]
    assert summary.startswith("checked 1 file(s) for sm_80: 0 error(s)"), summary
    assert summary.endswith(f"1 kernel(s); {cuda_versions().summary()}")
    assert session.archs_used() == ["sm_80"]
