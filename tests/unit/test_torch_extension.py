"""PyTorch extension files: torch's include folders and the Python headers when torch is
importable; one clear finding at the include when it is not."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from toolchain import find_nvcc, nvcc_command

from kernel_lsp.check import check_path
from kernel_lsp.compile import torch_ext
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "torch_extension" / "silu_and_mul.cu"
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0, CPU)"
)


@pytest.fixture
def fresh_lookup():
    torch_ext.torch_flags.cache_clear()
    yield
    torch_ext.torch_flags.cache_clear()


def test_extension_files_are_recognised_by_their_includes():
    assert torch_ext.torch_include(SAMPLE.read_text()).line == 6
    assert torch_ext.torch_include("#include <ATen/ATen.h>\n").target == "ATen/ATen.h"
    assert torch_ext.torch_include('#include "c10/util/Half.h"\n') is not None
    assert torch_ext.torch_include("// #include <torch/extension.h>\n#include <cuda_fp16.h>\n") is None
    assert torch_ext.extension_defines("/x/2nd-ext.cu") == (
        "TORCH_EXTENSION_NAME=_2nd_ext",
        "TORCH_API_INCLUDE_EXTENSION_H",
    )


def test_without_torch_one_finding_at_the_include_says_what_to_install(monkeypatch, fresh_lookup):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a)
    )
    check = check_path(str(SAMPLE), Settings(arch=("sm_90",)))
    assert not check.checked
    [finding] = check.diagnostics
    assert (finding.line, finding.severity, finding.code) == (6, Severity.WARNING, "torch")
    assert "torch is not importable" in finding.message
    assert f"{sys.executable} -m pip install torch" in finding.message


@needs_torch
def test_with_torch_its_include_folders_and_the_python_headers_are_added(fresh_lookup):
    flags = torch_ext.torch_flags()
    assert flags.problem is None
    dirs = [Path(d) for d in flags.system_include_dirs]
    assert any((d / "torch" / "extension.h").is_file() for d in dirs)
    assert any((d / "ATen" / "ATen.h").is_file() for d in dirs)
    assert Path(sysconfig.get_paths()["include"]) in dirs and any((d / "Python.h").is_file() for d in dirs)
    assert "torch" not in sys.modules, "torch must be asked in a child process, not imported here"


@needs_torch
def test_the_sample_preprocesses_with_the_derived_flags(tmp_path, fresh_lookup):
    # The full compile of torch/extension.h takes a minute of CPU: preprocessing proves that every
    # header is found with the flags kernel-lsp derives (the nvcc backend compiles it in full).
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (neither the nvidia-cuda-nvcc wheel nor one on PATH)")
    from kernel_lsp.compile import CompileOptions

    flags = torch_ext.torch_flags()
    options = CompileOptions(
        arch="sm_90",
        system_include_dirs=flags.system_include_dirs,
        defines=torch_ext.extension_defines(str(SAMPLE)),
    )
    cmd = nvcc_command(nvcc, str(SAMPLE), options, str(tmp_path / "out.ii"))
    cmd[1] = "-E"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "silu_and_mul_kernel" in (tmp_path / "out.ii").read_text()
