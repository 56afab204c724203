"""`kernel-lsp check PATH...` with ruff's conventions: the subcommand and its `--check` alias, one
summary line for a clean run (resources with -v), --quiet, --output-file, --exit-zero,
--select/--ignore (and select/ignore in [tool.kernel-lsp], per file), --stdin-filename, the
compiler's own suppression pragma, and a header's finding reported once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.cli import main

REPO = Path(__file__).resolve().parents[2]
BROKEN_SAMPLES = REPO / "samples" / "broken"
BASE = ["--no-gpu", "--arch", "sm_90"]
CLEAN = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
WARNS = "__global__ void k(float* x) { int unused; x[threadIdx.x] = 1.0f; }\n"
BROKEN = "__global__ void k(float* x) { x[threadIdx.x] = nope; }\n"
# 48 live floats under __launch_bounds__(1024, 2) (32 registers): ptxas spills.
SPILLS = """\
__global__ void __launch_bounds__(1024, 2) spills(const float* in, float* out, int n)
{
    float v[48];
#pragma unroll
    for (int i = 0; i < 48; ++i) v[i] = in[threadIdx.x + i * n];
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 48; ++i) acc += v[i] * v[47 - i] + v[(i * 7) % 48];
    out[threadIdx.x] = acc;
}
"""
# A spec that names a kernel the file does not have: a spec-kernel error, no GPU needed.
WRONG_SPEC = """\
from kernel_lsp.spec import Out, Scalar, Spec
SPEC = Spec(
    kernel="not_here",
    sizes=[{"n": 4}],
    args={"x": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda n: {"x": None},
)
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["check", *BASE, *args])
    out, err = capsys.readouterr()
    return code, out, err


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_check_and_the_check_flag_are_one_command(capsys, tmp_path):
    (tmp_path / "w.cu").write_text(WARNS)
    sub = run(capsys, str(tmp_path))
    code = main(["--check", *BASE, str(tmp_path)])
    alias = (code, *capsys.readouterr())
    assert sub == alias
    assert sub[0] == 0 and "[177-D]" in sub[1]


def test_a_clean_run_prints_one_summary_line_and_resources_on_request(capsys):
    code, out, _ = run(capsys, "-j", "2", str(REPO / "samples" / "vector_add"), str(REPO / "samples" / "dot"))
    assert code == 0
    assert lines(out) == [out.strip()] and out.startswith("checked 4 file(s) for sm_90: 0 error(s)"), out
    for flag in ("-v", "--show-resources", "--verbose"):
        code, out, _ = run(capsys, flag, str(REPO / "samples" / "vector_add"))
        kernels = [ln for ln in lines(out) if ": kernel vector_add [sm_90]: " in ln]
        assert code == 0 and len(kernels) == 2, (flag, out)
        assert "registers" in kernels[0] and "occupancy" in kernels[0]
        assert lines(out)[-1].startswith("checked 2 file(s)")


def test_quiet_prints_the_findings_only(capsys, tmp_path):
    (tmp_path / "ok.cu").write_text(CLEAN)
    assert run(capsys, "--quiet", str(tmp_path / "ok.cu"))[:2] == (0, "")
    (tmp_path / "bad.cu").write_text(BROKEN)
    code, out, _ = run(capsys, "-q", str(tmp_path))
    assert code == 1
    (line,) = lines(out)
    assert line.endswith('error: identifier "nope" is undefined [nvcc]')  # nvcc decides errors
    # JSON is a document: --quiet changes nothing in it.
    code, out, _ = run(capsys, "-q", "--format", "json", str(tmp_path))
    assert json.loads(out)["summary"]["errors"] == 1


def test_output_file_takes_the_report_and_stdout_stays_empty(capsys, tmp_path):
    (tmp_path / "bad.cu").write_text(BROKEN)
    target = tmp_path / "reports" / "results.sarif"  # its folder is made
    code, out, _ = run(capsys, "--format", "sarif", "--output-file", str(target), str(tmp_path / "bad.cu"))
    assert (code, out) == (1, "")
    results = json.loads(target.read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["nvcc-error"]
    code, out, _ = run(capsys, "-o", str(tmp_path / "out.txt"), str(tmp_path / "bad.cu"))
    assert code == 1 and out == "" and "1 error(s)" in (tmp_path / "out.txt").read_text()
    # A report that cannot be written is the tool failing, with a message.
    (tmp_path / "a-file").write_text("")
    code, out, err = run(capsys, "-o", str(tmp_path / "a-file" / "r.txt"), str(tmp_path / "bad.cu"))
    assert code == 2 and "cannot write" in err


def test_exit_zero_passes_findings_but_not_tool_failures(capsys, tmp_path):
    (tmp_path / "bad.cu").write_text(BROKEN)
    code, out, _ = run(capsys, "--exit-zero", str(tmp_path / "bad.cu"))
    assert code == 0 and "1 error(s)" in out
    assert run(capsys, "--exit-zero", "--strict", str(tmp_path / "bad.cu"))[0] == 0
    assert run(capsys, "--exit-zero", str(tmp_path / "missing.cu"))[0] == 2


def test_ignore_and_select_a_compiler_number(capsys, tmp_path):
    (tmp_path / "w.cu").write_text(WARNS)
    path = str(tmp_path / "w.cu")
    assert "[177-D]" in run(capsys, path)[1]
    for ignore in ("177", "177-D", "#177-D", "spill,177"):
        code, out, _ = run(capsys, "--strict", "--ignore", ignore, path)
        assert code == 0 and "0 warning(s)" in out and "[177-D]" not in out, ignore
    # A number is that number: 17 is not a prefix of 177 (EDG's numbers are not a hierarchy).
    assert run(capsys, "--ignore", "17", path)[1].count("[177-D]") == 1
    # --select keeps only what it names.
    assert "[177-D]" not in run(capsys, "--select", "spill", path)[1]
    assert "[177-D]" in run(capsys, "--select", "177", path)[1]
    # The most specific selector wins: select 177 beats a broader ignore... of every code.
    assert "[177-D]" in run(capsys, "--select", "177", "--ignore", "ALL", path)[1]


def test_compile_errors_are_reported_whatever_the_selection(capsys, tmp_path):
    (tmp_path / "bad.cu").write_text(BROKEN)
    code, out, _ = run(capsys, "--select", "spill", "--ignore", "ALL", str(tmp_path / "bad.cu"))
    assert code == 1 and 'identifier "nope" is undefined' in out


def test_a_spill_and_a_spec_finding_can_be_ignored(capsys, tmp_path):
    (tmp_path / "s.cu").write_text(SPILLS)
    code, out, _ = run(capsys, "--strict", str(tmp_path / "s.cu"))
    assert code == 1 and "[spill]" in out
    code, out, _ = run(capsys, "--strict", "--ignore", "spill", str(tmp_path / "s.cu"))
    assert code == 0 and "[spill]" not in out, out

    (tmp_path / "k.cu").write_text(CLEAN)
    (tmp_path / "k.spec.py").write_text(WRONG_SPEC)
    code, out, _ = run(capsys, "--specs", "run", str(tmp_path / "k.cu"))
    assert code == 1 and "[spec-kernel]" in out, out
    found = sorted(set(re.findall(r"\[(spec-[a-z-]+)\]$", out, re.M)))  # and what follows from it
    for ignore in (",".join(found), "spec-", "spec"):  # prefixes select families, as in ruff
        code, out, _ = run(capsys, "--specs", "run", "--ignore", ignore, str(tmp_path / "k.cu"))
        assert code == 0 and "[spec-" not in out, (ignore, out)


def test_pyproject_select_and_ignore_hold_per_file(capsys, tmp_path):
    quiet, loud = tmp_path / "quiet", tmp_path / "loud"
    for project in (quiet, loud):
        project.mkdir()
        (project / "w.cu").write_text(WARNS)
        (project / "s.cu").write_text(SPILLS)
    (quiet / "pyproject.toml").write_text('[tool.kernel-lsp]\nignore = ["177"]\n')
    code, out, _ = run(capsys, str(tmp_path))
    found = {ln.split(":")[0].replace(str(tmp_path) + os.sep, "") for ln in lines(out)[:-1]}
    assert found == {f"quiet{os.sep}s.cu", f"loud{os.sep}w.cu", f"loud{os.sep}s.cu"}, out
    # --ignore adds to the project's ignore (ruff's convention); --select replaces its select.
    code, out, _ = run(capsys, "--ignore", "spill", str(tmp_path))
    found = {ln.split(":")[0].replace(str(tmp_path) + os.sep, "") for ln in lines(out)[:-1]}
    assert found == {f"loud{os.sep}w.cu"}, out
    (loud / "pyproject.toml").write_text('[tool.kernel-lsp]\nselect = "spill"\n')
    code, out, _ = run(capsys, str(loud))
    assert "[177-D]" not in out and "[spill]" in out
    code, out, _ = run(capsys, "--select", "177", str(loud))
    assert code == 0 and "[177-D]" in out and "[spill]" not in out


def test_an_unknown_code_in_pyproject_is_a_config_problem_not_a_silent_no_op(capsys, tmp_path):
    (tmp_path / "w.cu").write_text(WARNS)
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\nignore = ["splil"]\n')
    code, out, err = run(capsys, str(tmp_path))
    assert code == 0 and "no diagnostic code starts with `splil`" in err and "[177-D]" in out


@pytest.mark.parametrize("flag", ["--select", "--ignore"])
def test_an_unknown_code_on_the_command_line_is_a_usage_error(capsys, tmp_path, flag):
    """ruff's convention: `--select E999` exits 2 with a message, before anything is checked."""
    (tmp_path / "w.cu").write_text(WARNS)
    code, out, err = run(capsys, flag, "177,E999", str(tmp_path))
    assert (code, out) == (2, "")
    assert f"invalid value for {flag}: no diagnostic code starts with `E999`" in err
    code, _, err = run(capsys, flag, "splil", str(tmp_path))
    assert code == 2 and "`splil` (did you mean `spill`?)" in err
    # A number is a code only where the compiler has a diagnostic of that number (issue 45).
    for number in ("9999", "20999-D", "0"):
        code, out, err = run(capsys, flag, f"177,{number}", str(tmp_path))
        assert (code, out) == (2, ""), number
        assert f"`{number}` (the compiler has no diagnostic of that number)" in err
    # Known codes, prefixes, numbers and ALL are fine.
    code, out, _ = run(capsys, flag, "177,20011-D,#550,spec-,nvrtc-error,ALL", str(tmp_path))
    assert code == 0 and lines(out)[-1].startswith("checked 1 file(s)")


def test_the_compilers_pragma_suppresses_a_warning_with_both_compilers(capsys, tmp_path):
    pragma = "#pragma nv_diag_suppress 177\n"
    (tmp_path / "device.cu").write_text(pragma + WARNS)  # NVRTC
    host = WARNS + "int main() { k<<<1, 32>>>(nullptr); return 0; }\n"
    (tmp_path / "host.cu").write_text(pragma + host)  # nvcc
    (tmp_path / "host_loud.cu").write_text(host)
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 0
    assert [ln.split(":")[0] for ln in lines(out)[:-1]] == [str(tmp_path / "host_loud.cu")], out


def _cli(*args: str, stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_stdin_is_checked_as_the_named_file_with_its_projects_flags(tmp_path):
    # The project's include folder comes from its compile_commands.json only: a file that
    # includes its header compiles only with the project's flags.
    project = tmp_path / "project"
    (project / "include").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "include" / "scale.cuh").write_text("#pragma once\n#define SCALE 2.0f\n")
    unit = project / "src" / "k.cu"
    database = [
        {"directory": str(project), "file": str(unit), "command": f"nvcc -I{project / 'include'} -c {unit}"}
    ]
    (project / "compile_commands.json").write_text(json.dumps(database))
    text = '#include "scale.cuh"\n__global__ void k(float* x) { int unused; x[0] = SCALE; }\n'
    # The file need not exist on disk: the text from stdin is what is checked.
    done = _cli(*BASE, "--stdin-filename", "src/k.cu", "-", stdin=text, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    (line, summary) = lines(done.stdout)
    assert line.startswith("src/k.cu:2:") and "[177-D]" in line, done.stdout
    assert summary.startswith("checked 1 file(s)")
    # Without `-` too, as ruff accepts it; findings at the named path, errors exit 1.
    broken = _cli(*BASE, "--stdin-filename", "src/k.cu", stdin=BROKEN, cwd=project)
    assert broken.returncode == 1 and lines(broken.stdout)[0].startswith("src/k.cu:1:"), broken.stdout
    # Stdin and other paths at once is a usage error.
    both = _cli(*BASE, "--stdin-filename", "src/k.cu", "src", stdin=text, cwd=project)
    assert both.returncode == 2 and "stdin" in both.stderr


def test_a_headers_finding_is_reported_once_with_its_includers(capsys, tmp_path):
    """Text and GitHub annotations: the header's finding once, its includers as related lines.
    JSON and SARIF, which scripts read file by file, also list it under each file it breaks, at
    the `#include` (issue 45: the others showed `"diagnostics": []`)."""
    (tmp_path / "common.cuh").write_text(
        "#pragma once\n__device__ float twice(float v) { return 2 * v + oops; }\n"
    )
    for name in ("a.cu", "b.cu"):
        (tmp_path / name).write_text(
            '#include "common.cuh"\n__global__ void k(float* x) { x[0] = twice(x[0]); }\n'
        )
    code, out, _ = run(capsys, "--format", "sarif", str(tmp_path))
    assert code == 1
    results = json.loads(out)["runs"][0]["results"]
    uri = [os.path.basename(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results]
    assert sorted(uri) == ["a.cu", "b.cu", "common.cuh"]
    (result,) = [r for r, u in zip(results, uri, strict=True) if u == "common.cuh"]
    related = [r["physicalLocation"]["artifactLocation"]["uri"] for r in result["relatedLocations"]]
    assert sorted(os.path.basename(u) for u in related) == ["a.cu", "b.cu"]
    assert {r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]} == {1}
    for r, u in zip(results, uri, strict=True):
        assert "oops" in r["message"]["text"] and r["level"] == "error"
        if u != "common.cuh":  # at the #include, pointing at the header's line
            assert r["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
            assert r["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 2
    # One finding in the text formats, and in their error count.
    code, out, _ = run(capsys, "--format", "github", "--quiet", str(tmp_path))
    (annotation,) = lines(out)
    assert annotation.startswith("::error file=") and "common.cuh" in annotation.split("::")[1]
    assert "included from" in annotation and "a.cu:1" in annotation and "b.cu:1" in annotation
    code, out, _ = run(capsys, str(tmp_path))
    assert lines(out)[-1].startswith("checked 3 file(s) for sm_90: 1 error(s)"), out
    # The header not checked itself: its finding once (under the first file), and each file that
    # includes it lists the error at its #include.
    code, out, _ = run(capsys, "--format", "json", str(tmp_path / "a.cu"), str(tmp_path / "b.cu"))
    report = json.loads(out)
    assert report["summary"]["errors"] == 3
    at_header = [d for f in report["files"] for d in f["diagnostics"] if d["path"].endswith("common.cuh")]
    assert len(at_header) == 1 and len(at_header[0]["related"]) == 2
    for f in report["files"]:
        (own,) = [d for d in f["diagnostics"] if d["path"] == f["path"]]
        assert (own["line"], own["severity"]) == (1, "error") and "common.cuh:2" in own["message"]


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_the_broken_samples_header_typo_counts_once(capsys, fmt):
    code, out, _ = run(capsys, "--format", fmt, str(BROKEN_SAMPLES))
    assert code == 1
    assert sum("flaot" in ln for ln in lines(out)) == 1, out
    assert "2 error(s)" in lines(out)[-1]
