"""nvcc's front end alone (the first phase of an nvcc file's check): the same findings as the
full compile on files written like real projects, including CUDA's host/device call checks and
errors that only an instantiation shows; no resources; NVRTC files have none; a cancel token
stops a running nvcc with its children."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from kernel_lsp.check import check_source, front_end_check
from kernel_lsp.compile import CompileOptions, compile_front_end, compile_source, find_toolchain
from kernel_lsp.compile.cancel import cancel, cancel_scope
from kernel_lsp.config import Settings

REAL = Path(__file__).parents[1] / "fixtures" / "real_projects"
TOOLCHAIN = find_toolchain()
pytestmark = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

FILES = [
    "cuda_samples/vectorAdd.cu",
    "llmc/layernorm.cu",
    "vllm_csrc/activation_kernels.cu",
    "broken/host_error.cu",
    "broken/missing_include.cu",
    "broken/warning_20011.cu",
    "broken/header_error.cu",
]

# Errors that come after parsing: a __host__ call from a __global__ function (a check --no_code_gen
# skips), one an instantiation shows, and a static_assert in a template.
AFTER_PARSING = """\
#include <cstdio>
void host_only() {}
__global__ void k3(float* x) { host_only(); x[0] = 1; }
template <typename T> __host__ __device__ void hd(T) { host_only(); }
__global__ void k4(float* x) { hd(1.0f); }
int main() { return 0; }
"""
INSTANCE_ERRORS = """\
struct P { float a; };
template <typename T> __global__ void k1(T* x) { x[threadIdx.x].foo = 1; }
template <typename T> __global__ void k2(T* x) { static_assert(sizeof(T) == 4, "four bytes"); x[0] = T(); }
int main() { k1<P><<<1, 1>>>(nullptr); k2<double><<<1, 1>>>(nullptr); return 0; }
"""


def _findings(result) -> list[tuple]:
    return [(d.path, d.line, d.col, d.severity, d.message, d.code) for d in result.diagnostics]


@pytest.mark.parametrize("name", FILES)
def test_front_end_findings_equal_the_full_compiles(name):
    path = REAL / name
    options = CompileOptions(arch="sm_90")
    # A text no other test compiled: a cached full result would serve the first phase.
    text = path.read_text() + "// the front end alone\n"
    first = compile_front_end(text, str(path), options)
    full = compile_source(text, str(path), options, use_cache=False)
    assert first is not None and first.stage == "front-end" and full.stage == "full"
    assert _findings(first) == _findings(full)
    assert first.kernels == [] and first.cubin is None


@pytest.mark.parametrize("text", [AFTER_PARSING, INSTANCE_ERRORS], ids=["call checks", "instances"])
def test_front_end_has_the_errors_after_parsing(tmp_path, text):
    path = tmp_path / "k.cu"
    path.write_text(text)
    options = CompileOptions(arch="sm_90")
    first = compile_front_end(text, str(path), options)
    full = compile_source(text, str(path), options, use_cache=False)
    assert first is not None and _findings(first) == _findings(full)
    assert sum(d.severity.label == "error" for d in first.diagnostics) == 2


def test_nvrtc_files_have_no_first_phase():
    text = "__global__ void k(float* x) { x[0] = 1; }\n"
    assert compile_front_end(text, "/tmp/kernel_lsp_front_end.cu", CompileOptions(arch="sm_90")) is None
    assert front_end_check(text, "/tmp/kernel_lsp_front_end.cu", Settings(arch=("sm_90",))) is None


def test_a_cached_full_result_serves_the_first_phase():
    path = REAL / "cuda_samples" / "vectorAdd.cu"
    options = CompileOptions(arch="sm_90")
    full = compile_source(path.read_text(), str(path), options)
    again = compile_front_end(path.read_text(), str(path), options)
    assert again is not None and again.stage == "full" and again.cached and again.kernels == full.kernels


def test_front_end_check_carries_the_files_other_findings(tmp_path):
    path = tmp_path / "k.cu"
    text = "// kernel-lsp: launch nope grid=1 block=1\n" + AFTER_PARSING
    path.write_text(text)
    settings = Settings(arch=("sm_90",))
    first = front_end_check(text, str(path), settings)
    full = check_source(text, str(path), settings)
    assert first is not None and first.front_end_only and not full.front_end_only
    assert [d.message for d in first.diagnostics] == [d.message for d in full.diagnostics]
    assert any("nope" in d.message for d in first.diagnostics)


def _fake_toolkit(tmp_path: Path, script: str) -> Path:
    bin_dir = tmp_path / "toolkit" / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + script)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return tmp_path / "toolkit"


def test_a_cancel_stops_nvcc_and_its_children(monkeypatch, tmp_path):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv(
        "CUDA_HOME", str(_fake_toolkit(tmp_path, f"sleep 300 &\necho $! > {pid_file}\nwait\n"))
    )
    token = str(tmp_path / "cancel-me")
    path = REAL / "cuda_samples" / "vectorAdd.cu"
    threading.Timer(1.0, cancel, args=(token,)).start()
    start = time.monotonic()
    with cancel_scope(token):
        result = compile_source(path.read_text() + "// cancel\n", str(path), CompileOptions(arch="sm_90"))
    assert time.monotonic() - start < 10
    assert result.cancelled and result.diagnostics == [] and not result.timed_out
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the cancelled nvcc's child is still running")
    # Outside the scope the token means nothing; a cancelled result was not cached.
    monkeypatch.delenv("CUDA_HOME")
    again = compile_source(path.read_text() + "// cancel\n", str(path), CompileOptions(arch="sm_90"))
    assert not again.cached and not again.cancelled and again.ok
