"""`kernel-lsp --check`: exit codes 0/1/2, findings, per-kernel resources, bad input, settings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.source import find_kernels

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"

BASE = ["--no-gpu", "--arch", "sm_90"]
# Samples with host code, a CMake project and a PyTorch extension: tests/integration/test_real_samples.py.
REAL_WORLD = ("host_program", "cmake_project", "torch_extension")


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["check", *BASE, "--show-resources", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_samples_are_clean_with_resources_per_kernel(capsys):
    code, out, err = check(capsys, "-j", "2", str(SAMPLES))
    assert code == 0, out + err
    files = [
        os.path.join(root, n)
        for root, _, names in os.walk(SAMPLES)
        if "broken" not in root and not any(d in root for d in REAL_WORLD)
        for n in names
        if n.endswith(".cu")
    ]
    for f in files:
        with open(f) as fh:
            for k in find_kernels(fh.read()):
                assert re.search(
                    rf"{re.escape(os.path.relpath(f))}: kernel {k.name} \[sm_90\]: \d+ registers", out
                ), (
                    f,
                    k.name,
                )
    assert re.search(r"checked \d+ file\(s\) for sm_90: 0 error\(s\), 0 warning\(s\), \d+ kernel\(s\)", out)


def test_broken_samples_report_the_expected_findings(capsys):
    code, out, _ = check(capsys, str(SAMPLES / "broken"))
    assert code == 1
    lines = out.splitlines()
    rel = os.path.relpath(SAMPLES / "broken")

    def has(pattern: str) -> bool:
        return any(re.fullmatch(pattern, ln) for ln in lines)

    assert has(rf'{rel}/error\.cu:11:27: error: identifier "idx" is undefined \[nvcc\]')
    assert has(
        rf'{rel}/warning\.cu:10:9: warning: variable "unused" was declared but never referenced \[177-D\]'
    )
    assert has(rf'{rel}/broken_header\.cuh:6:12: error: identifier "flaot" is undefined \[nvcc\]')
    # The header's error is reported at the header, its includer's #include line under it.
    assert has(rf"    {rel}/header_error\.cu:4:1: includes broken_header\.cuh here")
    assert not [ln for ln in lines if "header_error.cu" in ln and ": error:" in ln]
    # A whole program with host code compiles with nvcc (compiler = auto): no finding.
    assert not [ln for ln in lines if "host_code.cu" in ln and ": error:" in ln]
    assert any(re.search(r"host_code\.cu: kernel add_one \[sm_90\]: \d+ registers", ln) for ln in lines)
    # The header's own error is reported once, although both the header and its includer see it,
    # and counted once.
    assert sum("broken_header.cuh:6:12: error" in ln for ln in lines) == 1
    assert lines[-1].startswith("checked 5 file(s) for sm_90: 2 error(s), 1 warning(s)")


def test_host_code_with_the_nvrtc_compiler_gets_one_finding_that_says_what_to_do(capsys):
    code, out, _ = check(capsys, str(SAMPLES / "broken" / "host_code.cu"), "--compiler", "nvrtc")
    assert code == 1
    host = [ln for ln in out.splitlines() if "host_code.cu" in ln and ": error:" in ln]
    assert len(host) == 1 and "[host-code]" in host[0] and "__CUDACC_RTC__" in host[0]
    assert "compiler setting is `nvrtc`" in host[0]


def test_missing_path_is_a_tool_failure(capsys, tmp_path):
    code, _, err = check(capsys, str(tmp_path / "nope.cu"))
    assert code == 2 and "no such file or folder" in err


def test_bad_arch_is_a_tool_failure(capsys):
    code = main(["--check", "--no-gpu", "--arch", "sm_12", str(SAMPLES / "broken" / "warning.cu")])
    _, err = capsys.readouterr()
    assert code == 2 and "unsupported arch `sm_12`" in err


def test_bad_flag_is_a_tool_failure(capsys):
    assert main(["--check", "--format", "xml", str(SAMPLES)]) == 2
    assert main(["--check"]) == 2
    capsys.readouterr()


def test_strict_fails_on_warnings(capsys):
    warning = str(SAMPLES / "broken" / "warning.cu")
    assert check(capsys, warning)[0] == 0
    assert check(capsys, "--strict", warning)[0] == 1


def test_defines_and_multiple_archs(capsys, tmp_path):
    f = tmp_path / "d.cu"
    f.write_text("__global__ void k(float* x) {\n#ifdef BAD\n  x[0] = nope;\n#endif\n}\n")
    assert check(capsys, str(f))[0] == 0
    code, out, _ = check(capsys, "-D", "BAD", str(f))
    assert code == 1 and ":3:" in out
    code, out, _ = check(capsys, "--arch", "sm_80,sm_100", str(f))
    assert code == 0 and "for sm_90, sm_80, sm_100" in out


def test_pyproject_settings_and_flag_override(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["BAD"]\nexclude = ["skip"]\n')
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "ignored.cu").write_text("this is not CUDA\n")
    (tmp_path / "d.cu").write_text("__global__ void k(float* x) {\n#ifdef BAD\n  x[0] = nope;\n#endif\n}\n")
    code = main(["--check", "--no-gpu", "--arch", "sm_90", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert code == 1 and "checked 1 file(s)" in out and "ignored.cu" not in out
    # A flag beats pyproject: -D replaces the list.
    code = main(["--check", "--no-gpu", "--arch", "sm_90", "-D", "GOOD", str(tmp_path)])
    assert code == 0
    capsys.readouterr()


def test_bad_pyproject_setting_is_reported_not_fatal(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.kernel-lsp]\ndefaultDevice = 3\n")
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    code = main(["--check", "--no-gpu", "--arch", "sm_90", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 0 and "defaultDevice" in err


# --- bad input through --check ------------------------------------------------------------------


def test_unreadable_files_fail_and_latin1_is_checked(capsys, tmp_path):
    # A Latin-1 `é` in a comment: checked, with a note, and the error after it on its line keeps
    # its column (each bad byte reads as one character).
    (tmp_path / "latin1.cu").write_bytes(b"__global__ void k(float* x) { /* caf\xe9 */ x[0] = nope; }\n")
    (tmp_path / "binary.cu").write_bytes(b"\x7fELF\x00\x00\x01" * 100)
    (tmp_path / "empty.cu").write_bytes(b"")
    (tmp_path / "huge.cu").write_bytes(b"// padding\n" * 500_000)  # 5.2 MiB
    code, out, err = check(capsys, str(tmp_path))
    assert code == 1, out + err  # binary and oversized files are never compiled: they fail
    assert re.search(r"latin1\.cu:1:37: info: the file is not UTF-8 \(byte 0xe9 at line 1\)", out), out
    assert re.search(r'latin1\.cu:1:49: error: identifier "nope" is undefined', out), out
    assert re.search(r"binary\.cu:1:1: error: not checked: this looks like a binary file", out)
    assert re.search(r"huge\.cu:1:1: error: not checked: the file is 5\.2 MiB, over the 2\.0 MiB limit", out)
    assert "--max-file-bytes" in out
    assert "empty.cu" not in out.replace("checked", "")
    # The limit is a flag too.
    code, out, _ = check(capsys, "--max-file-bytes", str(8 << 20), str(tmp_path / "huge.cu"))
    assert code == 0 and "not checked" not in out, out


def test_missing_header_is_an_error_with_advice(capsys, tmp_path):
    (tmp_path / "m.cu").write_text('#include "absent.cuh"\n__global__ void k() {}\n')
    code, out, _ = check(capsys, str(tmp_path / "m.cu"))
    # nvcc's words (it decides every error): its preprocessor's.
    assert code == 1 and "absent.cuh: No such file or directory" in out and "--include" in out


def test_real_entry_point_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", *BASE, str(SAMPLES / "broken" / "error.cu")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "samples/broken/error.cu:11:27: error:" in proc.stdout


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_formats_exit_codes_match_text(capsys, fmt):
    assert check(capsys, "--format", fmt, str(SAMPLES / "broken"))[0] == 1
    assert check(capsys, "--format", fmt, str(SAMPLES / "vector_add"))[0] == 0
