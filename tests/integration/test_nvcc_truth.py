"""nvcc's verdict is the truth (issue 45). On every file of tests/fixtures/nvcc_truth, kernel-lsp's
errors are the ones nvcc gives, run for real here as the file's build runs it: the
compile_commands.json entry's command (database/: `--ptx`, `--fatbin`, `-cubin`, `-c`, `-dc`, two
archs, a launcher, `-ccbin`), else `nvcc -c` for a file with host code (host/) and the device pass,
`nvcc -cubin`, for a device-only one (device/). Same file, same line, same message; 0 false, 0
missed. nvcc's findings are read here with a parser of this test's own.

And on a machine without a host compiler, where nvcc cannot run: a device-only file gets, of
NVRTC's errors, only those nvcc gives too (where nvcc gives them; NVRTC words some differently),
or one error that says nvcc is needed and what to install; never one of NVRTC's false ones.

The cuBLAS, cuFFT, cuRAND and cuSPARSE files need their wheel's headers: .ci/run installs them
(`pip install --target .venv/cuda-libs`, outside kernel-lsp's environment, whose own tests expect
them absent); elsewhere they are skipped, with the command that installs them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from jit_mode_cases import JIT_MODE_CASES
from jit_mode_cases import KERNEL as JIT_KERNEL

from kernel_lsp.advice import nvidia_library
from kernel_lsp.compile import (
    CompileOptions,
    choose_backend,
    compile_source,
    cuda_include_dirs,
    find_toolchain,
)
from kernel_lsp.compile.verdict import NVRTC_DEVICE_HEADERS
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity
from kernel_lsp.source import find_includes
from kernel_lsp.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "nvcc_truth"
DATABASE = CORPUS / "database" / "compile_commands.json"
# Where .ci/run installs the libraries' wheels (KERNEL_LSP_LIBRARY_HEADERS names another folder).
LIBRARY_HEADERS = Path(
    os.environ.get("KERNEL_LSP_LIBRARY_HEADERS", REPO / ".venv" / "cuda-libs" / "nvidia" / "cu13" / "include")
)
INSTALL_LIBRARIES = (
    "pip install --no-deps --target .venv/cuda-libs nvidia-cublas nvidia-cufft nvidia-curand nvidia-cusparse"
)
TOOLCHAIN = find_toolchain()
pytestmark = [
    pytest.mark.slow,  # two nvcc runs a file, Thrust and CUB among them: python -m pytest -m slow
    pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}"),
]

DEVICE = sorted(p.relative_to(CORPUS).as_posix() for p in (CORPUS / "device").glob("*.cu"))
HOST = sorted(p.relative_to(CORPUS).as_posix() for p in (CORPUS / "host").glob("*.cu"))
ENTRIES = {
    (CORPUS / "database" / e["file"]).relative_to(CORPUS).as_posix(): e["command"]
    for e in json.loads(DATABASE.read_text())
}
LAUNCHERS = {"ccache", "sccache"}

# nvcc's front end (`file(12): error: ...`), the host compiler and its preprocessor
# (`file:12:10: fatal error: ...`), ptxas (`ptxas fatal   : ...`, no line: the file's top).
_FRONT_END = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<message>.*)$")
_HOST = re.compile(r"^(?P<path>[^:(]+):(?P<line>\d+):\d+: (?:fatal )?error: (?P<message>.*)$")
_PTXAS = re.compile(r"^ptxas (?:error|fatal)\s*: (?P<message>.*)$")

Finding = tuple[str, int, str]  # (absolute path, line, message)


def build_command(name: str, output: Path) -> tuple[list[str], Path]:
    """The command the file's build runs (its output sent to `output`), and where it runs."""
    path = CORPUS / name
    if name in ENTRIES:
        args = shlex.split(ENTRIES[name])
        while os.path.basename(args[0]) in LAUNCHERS:
            args = args[1:]
        args[0] = str(TOOLCHAIN.nvcc)
        args[args.index("-o") + 1] = str(output)
        return args, DATABASE.parent
    mode = "-c" if name.startswith("host/") else "-cubin"
    return [
        str(TOOLCHAIN.nvcc),
        mode,
        "-arch=sm_90",
        "-std=c++17",
        f"-I{LIBRARY_HEADERS}",
        str(path),
        "-o",
        str(output),
    ], path.parent


def nvccs_errors(name: str, tmp_path: Path) -> list[Finding]:
    command, cwd = build_command(name, tmp_path / "out")
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    found: list[Finding] = []
    for line in (done.stdout + done.stderr).splitlines():
        if m := _FRONT_END.match(line) or _HOST.match(line):
            where = os.path.normpath(os.path.join(cwd, m.group("path")))
            found.append((where, int(m.group("line")), m.group("message").strip()))
        elif m := _PTXAS.match(line):
            found.append((str(CORPUS / name), 1, m.group("message").strip()))
    assert (done.returncode == 0) == (found == []), done.stdout + done.stderr
    return list(dict.fromkeys(found))  # nvcc repeats a finding once per pass that sees it


def settings_for(name: str) -> Settings:
    # A file its database builds takes the database's archs; the others are checked for sm_90.
    arch = () if name in ENTRIES else ("sm_90",)
    return Settings(arch=arch, include_dirs=(str(LIBRARY_HEADERS),))


def kernel_lsps_errors(name: str) -> list[Finding]:
    check = Workspace.fixed(settings_for(name)).analyze(str(CORPUS / name))
    return [
        (os.path.abspath(d.path), d.line, d.message)
        for d in check.diagnostics
        if d.severity == Severity.ERROR and not d.header_copy
    ]


def same(ours: Finding, truth: Finding) -> bool:
    """Same file and line, and nvcc's message (kernel-lsp may add advice after it: where it
    searched for a missing header, what to install)."""
    return ours[:2] == truth[:2] and ours[2].startswith(truth[2])


def missing_library(name: str) -> str | None:
    for inc in find_includes((CORPUS / name).read_text()):
        if nvidia_library(inc.target) is None:
            continue
        if not any((Path(d) / inc.target).is_file() for d in (LIBRARY_HEADERS, *cuda_include_dirs())):
            return f"{inc.target} is not installed: {INSTALL_LIBRARIES}"
    return None


@pytest.mark.parametrize("name", DEVICE + HOST + sorted(ENTRIES))
def test_kernel_lsps_errors_are_nvccs(name, tmp_path):
    if why := missing_library(name):
        pytest.skip(why)
    truth = nvccs_errors(name, tmp_path)
    ours = kernel_lsps_errors(name)
    false = [f for f in ours if not any(same(f, t) for t in truth)]
    missed = [t for t in truth if not any(same(f, t) for f in ours)]
    assert (false, missed) == ([], []), f"nvcc: {truth}\nkernel-lsp: {ours}"


def test_the_corpus_has_real_errors_and_clean_files_of_every_kind(tmp_path):
    """Guard: the comparison means something only if each kind of file has both outcomes."""
    broken = {
        "device/cstdint_typo.cu",
        "device/cub_wrong_call.cu",
        "device/fp16_no_conversion.cu",
        "device/global_named_like_libc.cu",
        "device/missing_project_header.cu",
        "host/atomic_add_double.cu",
        "host/host_typo_main.cu",
        "host/cublas_wrong_argument.cu",
        "database/candle/reduce.cu",
        "database/llmc/adamw.cu",
        "database/samples/matrix_mul_kernel.cu",
    }
    for names in (DEVICE, HOST, sorted(ENTRIES)):
        assert broken & set(names) and set(names) - broken
    # The host-pass error that only `nvcc -c` (the build) sees: the device pass compiles it.
    name = "host/atomic_add_double.cu"
    device_pass = [
        str(TOOLCHAIN.nvcc),
        "-cubin",
        "-arch=sm_90",
        str(CORPUS / name),
        "-o",
        str(tmp_path / "a"),
    ]
    assert subprocess.run(device_pass, capture_output=True, timeout=600, check=False).returncode == 0
    assert nvccs_errors(name, tmp_path)


@pytest.mark.parametrize("name", DEVICE)
def test_without_a_host_compiler_a_device_only_file_gets_no_false_error(name, tmp_path, monkeypatch):
    if why := missing_library(name):
        pytest.skip(why)
    truth = nvccs_errors(name, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++ here
    monkeypatch.delenv("CXX", raising=False)
    assert find_toolchain().problem is not None
    check = Workspace.fixed(settings_for(name)).analyze(str(CORPUS / name))
    errors = [d for d in check.diagnostics if d.severity == Severity.ERROR and not d.header_copy]
    needs_nvcc = [d for d in errors if d.code == "needs-nvcc"]
    for d in needs_nvcc:
        assert "host compiler" in d.message and "g++" in d.message, d.message
    # NVRTC's own words may differ (`cannot open source file` for a missing header), never where.
    nvrtc_errors = [(os.path.abspath(d.path), d.line) for d in errors if d.code != "needs-nvcc"]
    assert [f for f in nvrtc_errors if f not in {t[:2] for t in truth}] == []
    # A file nvcc finds clean may be unchecked here, never wrong.
    if not truth:
        assert nvrtc_errors == []


# libcu++ and cooperative groups are trusted by folder: a few of their headers stand for them.
FOLDER_SAMPLES = [
    "cuda/std/cstdint",
    "cuda/std/limits",
    "cuda/barrier",
    "cuda/atomic",
    "cooperative_groups/reduce.h",
]


@pytest.mark.parametrize("header", sorted(NVRTC_DEVICE_HEADERS) + FOLDER_SAMPLES)
def test_nvrtc_answers_only_for_device_headers_it_compiles_as_nvcc_does(header, tmp_path):
    """The evidence for verdict.py's list: a kernel file that includes the header is clean under
    NVRTC and under nvcc's device pass, and kernel-lsp lets NVRTC answer for it."""
    if not any((Path(d) / header).is_file() for d in (LIBRARY_HEADERS, *cuda_include_dirs())):
        pytest.skip(f"{header} is not installed: {INSTALL_LIBRARIES}")
    path = tmp_path / "k.cu"
    path.write_text(f"#include <{header}>\n__global__ void k(float* x) {{ x[threadIdx.x] = 1.f; }}\n")
    options = CompileOptions(arch="sm_90", include_dirs=(str(LIBRARY_HEADERS),))
    assert choose_backend(path.read_text(), options, str(path)) == "nvrtc"
    nvrtc = compile_source(path.read_text(), str(path), replace(options, compiler="nvrtc"), use_cache=False)
    assert nvrtc.ok and nvrtc.diagnostics == [], nvrtc.diagnostics
    command = [
        str(TOOLCHAIN.nvcc),
        "-cubin",
        "-arch=sm_90",
        f"-I{LIBRARY_HEADERS}",
        str(path),
        "-o",
        str(tmp_path / "k"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0 and "error" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_host_pass_runs_once_a_check_and_names_no_arch():
    """Two archs: the host pass (the build's, once) runs with the first arch's compile only; its
    error names no arch, as though only sm_80 had it."""
    name = "host/atomic_add_double.cu"
    check = Workspace.fixed(Settings(arch=("sm_80", "sm_90"))).analyze(str(CORPUS / name))
    assert [(r.arch, r.host_pass) for r in check.results] == [("sm_80", True), ("sm_90", False)]
    (error,) = [d for d in check.diagnostics if d.severity == Severity.ERROR and not d.header_copy]
    assert error.line == 7 and error.message.startswith('function "atomicAdd(double *, double)" has already')
    assert "[sm_" not in error.message


@pytest.mark.parametrize(("name", "text", "refused"), JIT_MODE_CASES, ids=[c[0] for c in JIT_MODE_CASES])
def test_nvrtc_refuses_exactly_what_the_jit_mode_table_says(name, text, refused, tmp_path):
    """The evidence for hostcode.find_unannotated, whose table tests/unit/test_verdict.py
    holds it to: NVRTC itself refuses each text the table says it refuses, and takes the others."""
    path = tmp_path / "k.cu"
    path.write_text(text + JIT_KERNEL)
    options = CompileOptions(arch="sm_90", compiler="nvrtc")
    result = compile_source(path.read_text(), str(path), options, use_cache=False)
    errors = [d.message for d in result.diagnostics if d.severity == Severity.ERROR]
    assert bool(errors) == refused, errors
