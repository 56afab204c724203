"""`kernel-lsp --check` as a new user drives it (issue 14): which files it takes, what it prints
for them, and how it ends (help, pipes, no files, excludes, BOMs, JSON/SARIF paths)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.cli import main

REPO = Path(__file__).resolve().parents[2]
BASE = ["--no-gpu", "--arch", "sm_90"]
CLEAN = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
BROKEN = "__global__ void k(float* x) { x[threadIdx.x] = nope; }\n"
SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(
    kernel="k",
    sizes=[{"n": 4}],
    args={"x": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda n: {"x": [1.0] * n},
)
"""


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--check", *BASE, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_the_commands_and_main_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for word in ("--check", "bench", "optimize", "spec FILE", "--format", "--no-gpu", "--strict", "--arch"):
        assert word in out, word


def test_utf8_bom_does_not_hide_the_real_error(capsys, tmp_path):
    (tmp_path / "bom.cu").write_bytes(b"\xef\xbb\xbf" + BROKEN.encode())
    (tmp_path / "plain.cu").write_text(BROKEN)
    code, out, _ = check(capsys, str(tmp_path / "bom.cu"))
    _, plain, _ = check(capsys, str(tmp_path / "plain.cu"))
    assert code == 1
    lines = [ln for ln in out.splitlines() if ": error:" in ln]
    assert len(lines) == 1 and 'identifier "nope" is undefined' in lines[0], out
    # Same line and column as without the mark (editors do not show it).
    assert (
        lines[0].split("bom.cu")[1]
        == next(ln for ln in plain.splitlines() if ": error:" in ln).split("plain.cu")[1]
    )


def test_the_same_file_named_twice_is_checked_once(capsys, tmp_path):
    f = tmp_path / "a.cu"
    f.write_text(BROKEN)
    code, out, _ = check(capsys, str(f), str(f), str(tmp_path), os.path.relpath(f))
    assert code == 1
    assert sum(": error:" in ln for ln in out.splitlines()) == 1
    assert out.splitlines()[-1].startswith("checked 1 file(s) for sm_90: 1 error(s)")


def test_a_named_file_that_is_not_cuda_is_refused(capsys, tmp_path):
    (tmp_path / "README.md").write_text("# notes\n\nnot CUDA at all\n")
    code, out, err = check(capsys, str(tmp_path / "README.md"))
    assert code == 2 and out == ""
    assert "not a CUDA file (.cu or .cuh)" in err and "README.md" in err


def test_no_files_found_is_said_and_exits_2(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, err = check(capsys, str(tmp_path / "empty"))
    assert code == 2 and "checked 0" not in out
    assert "no .cu or .cuh files found" in err


def test_force_exclude_holds_for_named_files(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\nexclude = ["legacy"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "error.cu").write_text(BROKEN)
    (tmp_path / "good.cu").write_text(CLEAN)
    named = [str(tmp_path / "legacy" / "error.cu"), str(tmp_path / "good.cu")]
    # As pre-commit runs it: the excluded file is not checked.
    code, out, _ = check(capsys, "--force-exclude", *named)
    assert code == 0, out
    assert "error.cu" not in out and out.splitlines()[-1].startswith("checked 1 file(s)")
    # Only excluded files named: nothing to do, which passes (a commit that touches only them).
    code, out, err = check(capsys, "--force-exclude", named[0])
    assert code == 0 and "excluded" in err and out == ""
    # Named by hand without the flag, a file is checked (ruff's convention).
    assert check(capsys, named[0])[0] == 1


def test_json_paths_are_all_relative(capsys, tmp_path, monkeypatch):
    (tmp_path / "h.cuh").write_text("__device__ float f(float x) { return x * undefined_y; }\n")
    (tmp_path / "main.cu").write_text('#include "h.cuh"\n__global__ void k(float* x) { x[0] = f(x[0]); }\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = check(capsys, "--format", "json", "main.cu")
    assert code == 1
    report = json.loads(out)
    paths = [f["path"] for f in report["files"]]
    for f in report["files"]:
        for d in f["diagnostics"]:
            paths.append(d["path"])
            paths += [r["path"] for r in d["related"]]
    # The header's finding, at the header, with the #include that leads to it as related.
    assert any(
        d["path"] == "h.cuh" and [r["path"] for r in d["related"]] == ["main.cu"]
        for f in report["files"]
        for d in f["diagnostics"]
    ), out
    assert all(not os.path.isabs(p) for p in paths), paths


def test_sarif_uris_are_encoded_and_rules_are_described(capsys, tmp_path, monkeypatch):
    (tmp_path / "my kernels,v2.cu").write_text(BROKEN)
    (tmp_path / "w.cu").write_text("__global__ void k(float* x) { int unused = 1; x[0] = 1.0f; }\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = check(capsys, "--format", "sarif", ".")
    assert code == 1
    run = json.loads(out)["runs"][0]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert "my%20kernels%2Cv2.cu" in uris, uris
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {"nvcc-error", "177-D"}  # nvcc's verdict: its words, its code
    for r in rules:
        assert r["shortDescription"]["text"] and r["shortDescription"]["text"] != r["id"], r


def test_spec_d_files_checked_without_a_gpu_say_they_were_not_verified(capsys, tmp_path):
    (tmp_path / "k.cu").write_text(
        "// kernel-lsp: launch k grid=1 block=32\n__global__ void k(float* x, int n) { x[threadIdx.x] = 1.0f; }\n"
    )
    (tmp_path / "k.spec.py").write_text(SPEC)
    (tmp_path / "plain.cu").write_text(CLEAN)
    code, out, _ = check(capsys, str(tmp_path))
    assert code == 0, out
    assert "1 file(s) with a spec not verified on a GPU (--no-gpu)" in out.splitlines()[-1]
    code, out, _ = check(capsys, "--format", "json", str(tmp_path))
    report = json.loads(out)
    assert {os.path.basename(f["path"]): f["unverified"] for f in report["files"]} == {
        "k.cu": "--no-gpu",
        "plain.cu": None,
    }
    assert report["summary"]["unverified"] == 1
    code, out, _ = check(capsys, "--format", "sarif", str(tmp_path))
    (item,) = json.loads(out)["runs"][0]["properties"]["unverified"]
    assert item["uri"].endswith("k.cu") and item["reason"] == "--no-gpu"


def test_a_closed_pipe_ends_quietly(tmp_path):
    for i in range(30):
        (tmp_path / f"k{i}.cu").write_text(CLEAN)
    p = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp", "--check", *BASE, "-j", "1", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    p.stdout.close()  # the reader is gone before anything is written (`| head -0`)
    err = p.stderr.read().decode()
    code = p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141, (code, err)


def test_pytest_shows_skip_reasons_by_default(pytestconfig):
    assert "-rs" in pytestconfig.getini("addopts")
