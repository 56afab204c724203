"""A missing NVIDIA package is one finding in the text report, with the count of files it breaks
(issue 45: a library every file includes gave one identical error per file), while JSON and SARIF
still list the error under every file it breaks."""

from __future__ import annotations

import json
import os

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import artifact

# cuDNN: a library no test installs (its wheel is hundreds of MB).
HEADER = "cudnn.h"
PACKAGE = "nvidia-cudnn-cu13"
pytestmark = pytest.mark.skipif(
    artifact._installed_header_folder(HEADER) is not None, reason=f"{HEADER} is installed here"
)


def project(root):
    """common.cuh includes the library; k1-k3 include common.cuh, k4 and k5 the library."""
    (root / "common.cuh").write_text(f"#pragma once\n#include <{HEADER}>\n__device__ inline int one() {{ return 1; }}\n")
    for i in (1, 2, 3):
        (root / f"k{i}.cu").write_text(f'#include "common.cuh"\n__global__ void k{i}(int* p) {{ *p = one(); }}\n')
    for i in (4, 5):
        (root / f"k{i}.cu").write_text(f"#include <{HEADER}>\n__global__ void k{i}(int* p) {{ *p = 1; }}\n")
    return sorted(["common.cuh", *(f"k{i}.cu" for i in range(1, 6))])


def check(capsys, *args: str) -> tuple[int, str]:
    code = main(["check", "--no-gpu", "--arch", "sm_90", *args])
    return code, capsys.readouterr().out


def test_one_finding_per_missing_package_in_text_with_the_files_it_breaks(capsys, tmp_path):
    names = project(tmp_path)
    code, out = check(capsys, str(tmp_path))
    assert code == 1
    errors = [ln for ln in out.splitlines() if ": error: " in ln]
    assert len(errors) == 1, out
    (error,) = errors
    assert f"pip install {PACKAGE}" in error and f"It breaks {len(names)} files: " in error
    assert out.splitlines()[-1].startswith(f"checked {len(names)} file(s) for sm_90: 1 error(s)")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_and_sarif_list_the_error_under_every_file_it_breaks(capsys, tmp_path, fmt):
    names = project(tmp_path)
    code, out = check(capsys, "--format", fmt, str(tmp_path))
    assert code == 1
    report = json.loads(out)
    if fmt == "json":
        broken = {
            os.path.basename(f["path"])
            for f in report["files"]
            for d in f["diagnostics"]
            if d["severity"] == "error" and HEADER in d["message"] and d["path"] == f["path"]
        }
        assert report["summary"]["errors"] == len(names)
    else:
        results = report["runs"][0]["results"]
        broken = {
            os.path.basename(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
            for r in results
            if r["level"] == "error" and HEADER in r["message"]["text"]
        }
        assert len(results) == len(names)
    assert sorted(broken) == names
