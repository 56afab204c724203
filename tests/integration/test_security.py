"""Opening or checking a repository must not run its code (issue 19), tried as an attacker would,
with a marker file as the proof that nothing ran:

- no value from the workspace reaches nvcc's shell: each way a define gets there (a
  compile_commands.json entry, its response file, pyproject.toml, `-D`; the editor's setting is in
  tests/e2e/test_security_server.py), undefines, include folders, pre-included files, file and
  folder names, -std, archs and code-generation values; the defines keep their meaning;
- launch comments and `#define` values are never given to Python's eval;
- specs run only on the user's action: `--specs static`, CI, pyproject's `specs.run = "never"`;
- reports, backups and spec skeletons are never written through a link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain
from kernel_lsp.compile.compile_commands import parse_arguments
from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.safe_expr import ExprError, safe_eval
from kernel_lsp.safe_write import UnsafeWrite
from kernel_lsp.spec import eval_expr, source_constants

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

# Host code: the file goes to nvcc, whose steps run through `sh -c`.
HOST_CU = "#include <cstdio>\n__global__ void k(int* p) { *p = EVIL; }\nint main() { return 0; }\n"


def hostile(marker: Path) -> str:
    """A value that is a harmless C expression (`1` and a comment) and, read by a shell, runs
    `touch marker` twice over ($(...) and backticks)."""
    return f"1/*$(touch {marker})`touch {marker}`*/"


def check(*argv: str) -> int:
    return main(["--check", "--no-gpu", *argv])


def write_database(folder: Path, entry: dict) -> None:
    (folder / "compile_commands.json").write_text(json.dumps([{"directory": str(folder), **entry}]))


# --- defines: one regression test per way a define reaches nvcc ---------------------------------


@needs_nvcc
def test_define_in_a_database_entry_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    write_database(
        tmp_path, {"file": "k.cu", "arguments": ["nvcc", f"-DEVIL={hostile(marker)}", "-c", "k.cu"]}
    )
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out  # EVIL reached the compile as 1


@needs_nvcc
def test_define_in_a_database_command_string_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    command = f"nvcc '-DEVIL={hostile(marker)}' -c k.cu"
    write_database(tmp_path, {"file": "k.cu", "command": command})
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
def test_define_in_a_response_file_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    (tmp_path / "flags.rsp").write_text(f"'-DEVIL={hostile(marker)}'\n")
    write_database(tmp_path, {"file": "k.cu", "arguments": ["nvcc", "@flags.rsp", "-c", "k.cu"]})
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
def test_define_in_pyproject_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.kernel-lsp]\ndefines = [{json.dumps('EVIL=' + hostile(marker))}]\n"
    )
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
def test_define_on_the_command_line_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    code = check(str(tmp_path / "k.cu"), "-D", f"EVIL={hostile(marker)}")
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
def test_undefine_that_is_no_name_is_refused_with_a_diagnostic(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    args = ["nvcc", "-DEVIL=1", f"-UX$(touch {marker})", "-c", "k.cu"]
    write_database(tmp_path, {"file": "k.cu", "arguments": args})
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 1
    assert "is not a macro name; left out [define]" in capsys.readouterr().out


@needs_nvcc
def test_defines_keep_the_meaning_of_d_and_u():
    """`-DNAME` is 1, `-DNAME=` is empty, -U after -D, function-like macros, quotes and shell
    characters in values: as nvcc -D/-U gave them, in device and host code alike."""
    source = textwrap.dedent(
        """\
        #include <cstring>
        #define STR2(x) #x
        #define STR(x) STR2(x)
        static_assert(ONE == 1, "-DONE is 1");
        static_assert(sizeof(STR(EMPTY)) == 1, "-DEMPTY= is empty");
        static_assert(ARCH == 8, "-DARCH=(1<<3)");
        static_assert(TWICE(3) == 6, "function-like");
        static_assert(sizeof(SHELL) == sizeof("$(x) `y` ; | &"), "shell characters are plain text");
        #ifdef GONE
        #error -U comes after -D
        #endif
        __global__ void k(int* p) { *p = ARCH + TWICE(ONE); }
        int main() { return std::strcmp(FOO, "bar"); }
        """
    )
    options = CompileOptions(
        defines=(
            "ONE",
            "EMPTY=",
            "ARCH=(1<<3)",
            "TWICE(a)=((a)*2)",
            'FOO="bar"',
            'SHELL="$(x) `y` ; | &"',
            "GONE",
        ),
        undefines=("GONE",),
        compiler="nvcc",
    )
    for host_check in (False, True):
        result = compile_source(
            source, "/tmp/meaning.cu", replace(options, host_check=host_check), use_cache=False
        )
        assert result.ok and result.diagnostics == [], result.log


@pytest.mark.parametrize("compiler", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
def test_a_define_with_a_line_break_is_refused_with_a_diagnostic(compiler):
    """The preprocessor would cut the value at the line break (and a header line could not hold
    it): refused, said at the top of the file, for both backends."""
    source = "__global__ void k(int* p) { *p = 1; }\n"
    options = CompileOptions(defines=("X=1\n#include </etc/passwd>",), compiler=compiler)
    result = compile_source(source, "/tmp/newline.cu", options, use_cache=False)
    assert [(d.line, d.code) for d in result.diagnostics] == [(1, "define")]
    assert "line break" in result.diagnostics[0].message


def test_settings_refuse_a_define_with_a_line_break_and_keep_the_others():
    settings, problems = settings_from_dict({"defines": ["GOOD=1", "BAD=1\nmore", "ALSO=2"]})
    assert settings.defines == ("GOOD=1", "ALSO=2")
    assert problems == [
        "setting `defines`: define `BAD`: its value holds a line break or another control character; left out"
    ]


def test_nvrtc_takes_each_define_as_one_option():
    """NVRTC uses no shell; a value holding ` -DY=2` does not define Y."""
    source = "#ifdef Y\n#error Y was defined\n#endif\n__global__ void k(int* p) { *p = 1; }\n"
    result = compile_source(source, "/tmp/one.cu", CompileOptions(defines=("X=1 -DY=2",), compiler="nvrtc"))
    assert result.ok, result.diagnostics


# --- every other value from the workspace that reaches nvcc -------------------------------------


def weird_folder(root: Path, monkeypatch) -> tuple[Path, Path]:
    """A folder whose name a shell would run (nvcc quotes paths and escapes `$`, but neither a
    backtick nor a backslash, so `\\$(...)` runs too), holding a header; (folder, marker)."""
    marker = root / "MARKER"
    # A name cannot hold the marker's slashes: the shell would find its path here.
    monkeypatch.setenv("KLSP_TEST_MARKER", str(marker))
    folder = root / "d`touch $KLSP_TEST_MARKER`x\\$(touch $KLSP_TEST_MARKER)y"
    folder.mkdir()
    (folder / "weird.h").write_text("#define FROM_WEIRD 3\n")
    return folder, marker


@needs_nvcc
@pytest.mark.parametrize("how", ["-I", "-isystem", "-include"])
def test_include_folders_and_pre_includes_with_shell_text_never_run(tmp_path, how, capsys, monkeypatch):
    folder, marker = weird_folder(tmp_path, monkeypatch)
    source = HOST_CU.replace("EVIL", "FROM_WEIRD")
    if how != "-include":
        source = '#include "weird.h"\n' + source
    (tmp_path / "k.cu").write_text(source)
    flag = (
        [f"-I{folder}"]
        if how == "-I"
        else [how, str(folder / "weird.h") if how == "-include" else str(folder)]
    )
    write_database(tmp_path, {"file": "k.cu", "arguments": ["nvcc", *flag, "-c", "k.cu"]})
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out  # the header was found


@needs_nvcc
def test_include_folder_from_pyproject_with_shell_text_never_runs(tmp_path, capsys, monkeypatch):
    folder, marker = weird_folder(tmp_path, monkeypatch)
    (tmp_path / "k.cu").write_text('#include "weird.h"\n' + HOST_CU.replace("EVIL", "FROM_WEIRD"))
    (tmp_path / "pyproject.toml").write_text(f"[tool.kernel-lsp]\ninclude = [{json.dumps(str(folder))}]\n")
    code = check(str(tmp_path / "k.cu"))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
@pytest.mark.parametrize("name", ["a$(touch $KLSP_TEST_MARKER).cu", "a`touch $KLSP_TEST_MARKER`.cu"])
def test_file_and_folder_names_with_shell_text_never_run(tmp_path, name, capsys, monkeypatch):
    """The file in such a folder, with such a name: its neighbours' quoted includes still work."""
    folder, marker = weird_folder(tmp_path, monkeypatch)
    path = folder / name
    path.write_text('#include "weird.h"\n' + HOST_CU.replace("EVIL", "FROM_WEIRD"))
    code = check(str(path))
    assert not marker.exists()
    assert code == 0, capsys.readouterr().out


@needs_nvcc
def test_std_arch_and_codegen_values_with_shell_text_never_run(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    (tmp_path / "k.cu").write_text(HOST_CU)
    args = [
        "nvcc",
        "-DEVIL=1",
        f"-std=c++17$(touch {marker})",
        f"--maxrregcount=32$(touch {marker})",
        f"--fmad=true`touch {marker}`",
        "-c",
        "k.cu",
    ]
    flags = parse_arguments(args, str(tmp_path))
    assert flags.std is None and flags.extra == ()  # dropped: no word nvcc takes
    write_database(tmp_path, {"file": "k.cu", "arguments": args})
    assert check(str(tmp_path / "k.cu")) == 0, capsys.readouterr().out
    # An arch is checked before anything runs (the CLI refuses it; nvcc itself too).
    arch = f"sm_90`touch {marker}`$(touch {marker})"
    assert check(str(tmp_path / "k.cu"), "--arch", arch) == 2
    result = compile_source(
        HOST_CU, str(tmp_path / "k.cu"), CompileOptions(arch=arch, defines=("EVIL=1",), compiler="nvcc")
    )
    assert not result.ok
    assert not marker.exists()


# --- launch comments and #define values: never Python's eval ------------------------------------

ESCAPE = (
    "([c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'catch_warnings'][0]()"
    "._module.__builtins__['__import__']('os').system('touch {marker}'))"
)
SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(kernel="k", sizes=[{"n": 4}], args={"x": Out("float32", shape="n"), "n": Scalar("int32")},
            reference=lambda **_: {"x": 0})
"""


def test_hostile_launch_comment_through_check_runs_nothing(tmp_path, capsys):
    """eval with its builtins removed ran this (`().__class__` reaches every class): on every
    compile of a file with the comment, spec or not."""
    marker = tmp_path / "MARKER"
    comment = f"// kernel-lsp: launch k grid=1 block={ESCAPE.format(marker=marker)}\n"
    (tmp_path / "k.cu").write_text(comment + "__global__ void k(float* x, int n) { x[0] = 1.0f; }\n")
    assert check(str(tmp_path / "k.cu")) == 0
    out = capsys.readouterr().out
    assert "cannot read block=" in out and "is not allowed" in out
    assert not marker.exists()


def test_hostile_define_through_check_with_a_spec_runs_nothing(tmp_path, capsys):
    """The spec runs (the user's own check, --specs run), the .cu's `#define` is only read: its
    value feeds a launch line, and is never given to eval."""
    marker = tmp_path / "MARKER"
    source = (
        f"#define BLOCK {ESCAPE.format(marker=marker)}\n"
        "// kernel-lsp: launch k grid=cdiv(n, BLOCK) block=BLOCK\n"
        "__global__ void k(float* x, int n) { x[0] = 1.0f; }\n"
    )
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "k.spec.py").write_text(SPEC)
    check(str(tmp_path / "k.cu"), "--specs", "run")
    assert not marker.exists()
    assert "BLOCK" not in source_constants(source)  # not a number: not a constant


def test_safe_eval_keeps_what_specs_and_launch_lines_use():
    sizes = {"n": 1000, "M": 64, "N": 32, "TILE": 16, "head_dim": 128}
    assert safe_eval("cdiv(n, 256)", sizes) == 4
    assert safe_eval("(cdiv(N, TILE), cdiv(M, TILE))", sizes) == (2, 4)
    assert safe_eval("max(1, cdiv(n, 128))", sizes) == 8
    assert safe_eval("(n, head_dim // 2)", sizes) == (1000, 64)
    assert safe_eval("n if n > 2 and not M < 0 else 3", sizes) == 1000
    assert safe_eval("round_up(n, 7) + next_pow2(n) + log2(n) + (1 << 4) ^ 3 | ~0 & 1", sizes) is not None
    assert eval_expr("1.5 * n", sizes) == 1500.0


@pytest.mark.parametrize(
    "text, says",
    [
        ("().__class__.__base__.__subclasses__()", "attribute"),
        ("__import__('os')", "`__import__(...)` is not allowed"),
        ("open('/etc/passwd')", "`open(...)` is not allowed"),
        ("n[0]", "subscript"),
        ("(lambda: 1)()", "lambda"),
        ("[x for x in (1, 2)]", "comprehension"),
        ("'a' * 3", "str values"),
        ("9 ** 9 ** 9", "too large"),
        ("1 << 10 ** 9", "too large"),
        ("(1,) * 10 ** 9", "numbers only"),
        ("-" * 5000 + "1", "longer than"),
    ],
)
def test_safe_eval_refuses_what_is_not_arithmetic(text, says):
    with pytest.raises(ExprError) as e:
        safe_eval(text, {"n": 3})
    assert says in str(e.value)


# --- specs run only on the user's action -------------------------------------------------------

MARKING_SPEC = """\
import pathlib
pathlib.Path({marker!r}).write_text("the spec ran")
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(kernel="k", sizes=[{{"n": 4}}], args={{"x": Out("float32", shape="n"), "n": Scalar("int32")}},
            reference=lambda **_: {{"x": 0}})
"""
KERNEL = "__global__ void k(float* x, int n) { x[0] = 1.0f; }\n"


def spec_project(root: Path, pyproject: str = "") -> tuple[Path, Path]:
    marker = root / "MARKER"
    (root / "k.cu").write_text(KERNEL)
    (root / "k.spec.py").write_text(MARKING_SPEC.format(marker=str(marker)))
    if pyproject:
        (root / "pyproject.toml").write_text(pyproject)
    return root / "k.cu", marker


def test_check_runs_specs_on_the_users_own_machine(tmp_path):
    """The control: outside CI, `--check` is the user's action and the spec runs, as before."""
    cu, marker = spec_project(tmp_path)
    check(str(cu))
    assert marker.read_text() == "the spec ran"


def test_specs_static_reads_the_spec_without_running_it(tmp_path, capsys):
    cu, marker = spec_project(tmp_path)
    assert check(str(cu), "--specs", "static") == 0
    captured = capsys.readouterr()
    assert not marker.exists()
    assert "specs were read, not run (--specs static)" in captured.err
    assert "not verified on a GPU (specs not run: --specs static)" in captured.out


def test_in_ci_specs_are_read_unless_asked_to_run(tmp_path, capsys, monkeypatch):
    """CI=true (GitHub Actions, GitLab): a pull request's spec is a stranger's code; the summary
    names the flag that runs them."""
    cu, marker = spec_project(tmp_path)
    monkeypatch.setenv("CI", "true")
    assert check(str(cu), "--format", "json") == 0
    captured = capsys.readouterr()
    assert not marker.exists()
    assert "pass --specs run where the code is trusted" in captured.err
    assert json.loads(captured.out)["files"][0]["unverified"].startswith("specs not run: CI is set")
    check(str(cu), "--specs", "run")
    assert marker.exists()


def test_a_repository_can_turn_specs_off_but_not_on(tmp_path, monkeypatch):
    cu, marker = spec_project(tmp_path, '[tool.kernel-lsp]\nspecs = { run = "never" }\n')
    check(str(cu))
    assert not marker.exists()
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\nspecs = { run = "onAction" }\n')
    monkeypatch.setenv("CI", "1")
    check(str(cu))
    assert not marker.exists()  # "onAction" in the repository does not overrule CI


def test_a_static_read_still_finds_syntax_errors_and_unknown_kernels(tmp_path, capsys):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k.spec.py").write_text("import os\nos.system('true')\nSPEC = Spec(kernel='nope'\n")
    assert check(str(tmp_path / "k.cu"), "--specs", "static") == 1
    assert "k.spec.py:3:1: error: syntax error in spec" in capsys.readouterr().out
    (tmp_path / "k.spec.py").write_text("from kernel_lsp.spec import Spec\nSPEC = Spec(kernel='nope')\n")
    assert check(str(tmp_path / "k.cu"), "--specs", "static") == 1
    assert "k.spec.py:2:1: error: no kernel `nope` in the .cu file [spec-kernel]" in capsys.readouterr().out


def test_specs_run_setting_takes_never_and_on_action_only():
    assert settings_from_dict({"specs": {"run": "never"}})[0].specs_run == "never"
    assert settings_from_dict({"specs.run": "onAction"})[0].runs_specs
    settings, problems = settings_from_dict({"specs.run": "always"})
    assert settings == Settings() and "expected one of onAction, never" in problems[0]


# --- nothing written through a link ------------------------------------------------------------


def test_reports_are_not_written_through_a_kernel_lsp_link(tmp_path):
    from kernel_lsp.optimizer.model import Outcome, RunResult, Status
    from kernel_lsp.optimizer.report import write_report

    outside, workspace = tmp_path / "outside", tmp_path / "ws"
    outside.mkdir()
    workspace.mkdir()
    result = RunResult("k.cu", "k", "tune", "src", Outcome("baseline", 0, "original", Status.CORRECT))
    for link, target in (
        (workspace / ".kernel-lsp", outside),
        (workspace / ".kernel-lsp" / "reports", outside),
    ):
        if link.parent != workspace:
            (workspace / ".kernel-lsp").unlink()
            (workspace / ".kernel-lsp").mkdir()
        link.symlink_to(target)
        with pytest.raises(UnsafeWrite, match="is a symbolic link"):
            write_report(result, str(workspace))
        assert list(outside.iterdir()) == []
    (workspace / ".kernel-lsp" / "reports").unlink()
    paths = write_report(result, str(workspace))  # a real folder: written
    assert [Path(p).parent for p in paths] == [workspace / ".kernel-lsp" / "reports"] * 2


def test_apply_does_not_back_up_through_a_link_nor_write_the_file(tmp_path):
    from kernel_lsp.cli.optimize import apply_result
    from kernel_lsp.optimizer.session import OptimizeError

    outside, workspace = tmp_path / "outside", tmp_path / "ws"
    outside.mkdir()
    (workspace / ".kernel-lsp").mkdir(parents=True)
    (workspace / ".kernel-lsp" / "backups").symlink_to(outside)
    cu = workspace / "k.cu"
    cu.write_text("old\n")
    with pytest.raises(OptimizeError, match="is a symbolic link"):
        apply_result(str(cu), "old\n", "new\n", str(workspace))
    assert cu.read_text() == "old\n" and list(outside.iterdir()) == []
    (workspace / ".kernel-lsp" / "backups").unlink()
    assert "backup" in apply_result(str(cu), "old\n", "new\n", str(workspace))
    assert cu.read_text() == "new\n"
    assert [p.read_text() for p in (workspace / ".kernel-lsp" / "backups").iterdir()] == ["old\n"]


def test_spec_command_does_not_write_through_a_linked_spec(tmp_path, capsys):
    outside = tmp_path / "bashrc"
    outside.write_text("mine\n")
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "k.spec.py").symlink_to(outside)
    assert main(["spec", str(tmp_path / "k.cu"), "--force"]) != 0
    assert "is a symbolic link" in capsys.readouterr().err
    assert outside.read_text() == "mine\n"


# --- the repository's modules do not shadow ours in child processes -----------------------------


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_a_repositorys_multiprocessing_py_does_not_run_in_the_compile_workers(tmp_path):
    """`kernel-lsp --check` run in the repository (CI's usual way): the compile workers are
    `python -c ...` children started there, which would import its multiprocessing.py."""
    repo, scripts = tmp_path / "repo", tmp_path / "bin"
    repo.mkdir()
    scripts.mkdir()
    marker = tmp_path / "MARKER"
    (repo / "multiprocessing.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    )
    for name in ("a.cu", "b.cu"):
        (repo / name).write_text(KERNEL)
    # What the `kernel-lsp` console script is: its own folder, not the current one, on sys.path.
    (scripts / "kernel-lsp").write_text(
        "import sys\nfrom kernel_lsp.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, str(scripts / "kernel-lsp"), "--check", "a.cu", "b.cu", "-j", "2", "--no-gpu"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert not marker.exists()
    assert done.returncode == 0, done.stdout + done.stderr
