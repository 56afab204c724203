"""The samples of the real kind (issue 11): a cuda-samples-style program, a CMake project with its
compile_commands.json, a PyTorch extension. Each compiles cleanly with nvcc given the flags
kernel-lsp derives for it, and `kernel-lsp --check` is clean on them with the nvcc backend."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from toolchain import find_nvcc, nvcc_command

from kernel_lsp.cli import main
from kernel_lsp.config import Settings

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
HOST_PROGRAM = SAMPLES / "host_program" / "saxpy_main.cu"
CMAKE = SAMPLES / "cmake_project"
TORCH_SAMPLE = SAMPLES / "torch_extension" / "silu_and_mul.cu"
NVCC_BACKEND = importlib.util.find_spec("kernel_lsp.compile.nvcc") is not None
needs_nvcc_backend = pytest.mark.skipif(
    not NVCC_BACKEND, reason="host code needs the nvcc backend (kernel_lsp/compile/nvcc.py, issue 11 part A)"
)


@pytest.mark.parametrize(
    "cu", [HOST_PROGRAM, CMAKE / "src" / "blur.cu", CMAKE / "src" / "main.cu"], ids=lambda p: p.name
)
def test_nvcc_compiles_the_sample_cleanly_with_the_derived_flags(cu, tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (neither the nvidia-cuda-nvcc wheel nor one on PATH)")
    settings = Settings()
    project = settings.project_flags(str(cu)).flags
    arch = settings.archs(project)[0]
    if cu.is_relative_to(CMAKE):
        assert project is not None and arch == "sm_80", "the CMake sample's archs come from its database"
    options = settings.compile_options(arch, None, project)
    done = subprocess.run(
        nvcc_command(nvcc, str(cu), options, str(tmp_path / "out.cubin")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_the_cmake_sample_needs_its_database(tmp_path):
    # Without compile_commands.json the header's configuration is missing: the flags matter.
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (neither the nvidia-cuda-nvcc wheel nor one on PATH)")
    options = Settings().compile_options("sm_80")
    done = subprocess.run(
        nvcc_command(nvcc, str(CMAKE / "src" / "blur.cu"), options, str(tmp_path / "out.cubin")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "blur.h: No such file" in done.stderr


@needs_nvcc_backend
def test_check_is_clean_on_the_program_and_the_cmake_project(capsys):
    code = main(["check", "-v", "--no-gpu", "-j", "2", str(HOST_PROGRAM), str(CMAKE)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert re.search(r"saxpy_main\.cu: kernel saxpy \[sm_\d+\]: \d+ registers", out), out
    assert re.search(r"saxpy_main\.cu: kernel scale<float> \[sm_\d+\]", out), out
    # The project's archs (its -gencode flags), not the default.
    for arch in ("sm_80", "sm_90"):
        assert re.search(rf"blur\.cu: kernel box_blur_kernel \[{arch}\]: \d+ registers", out), out
    assert " 0 error(s), 0 warning(s)" in out


@needs_nvcc_backend
def test_check_on_the_torch_extension():
    # torch/extension.h costs nvcc ~35-45 s of CPU: more than the default nvcc timeout on a loaded
    # machine, so this run allows it ten minutes.
    env = {**os.environ, "KERNEL_LSP_NVCC_TIMEOUT_S": "600", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", str(TORCH_SAMPLE)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if importlib.util.find_spec("torch") is None:
        assert "silu_and_mul.cu:6:1: warning: not checked: this is a PyTorch extension" in done.stdout
    else:
        for instance in ("float", "double"):
            assert re.search(rf"kernel silu_and_mul_kernel<{instance}> \[sm_\d+\]", done.stdout), done.stdout
        assert " 0 error(s), 0 warning(s)" in done.stdout
