"""compile_commands.json as a flag source: finding it, every flag kind, relative paths, borrowed
entries, a malformed database, the stamp cache, and the merge with the settings in the checks."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from toolchain import find_nvcc

from kernel_lsp.check import check_path
from kernel_lsp.cli import main
from kernel_lsp.compile import compile_commands as cc
from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.model import Severity

REPO = Path(__file__).resolve().parents[2]
CMAKE_SAMPLE = REPO / "samples" / "cmake_project"

# What CMake writes for a CUDA target (Makefiles generator), plus every other spelling nvcc takes.
CMAKE_COMMAND = (
    "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DFOO=1 -D BAR -UBAZ -I../include "
    "-I /abs/inc --include-path=inc3 --include-path inc4 -isystem /opt/sys -isystem=sys2 "
    "--system-include=sys3 -O3 -DNDEBUG -std=gnu++17 "
    '"--generate-code=arch=compute_80,code=[compute_80,sm_80]" -gencode arch=compute_90a,code=sm_90a '
    "-gencode=arch=compute_86,code=compute_86 -arch=sm_75 --gpu-architecture=sm_89 -arch=native "
    "-Xcompiler=-fPIC -Xcompiler -DHOST_ONLY --expt-relaxed-constexpr --extended-lambda -MD -MT a.o "
    "-MF a.o.d -x cu -c ../src/a.cu -o a.o -maxrregcount 64 -use_fast_math -rdc=true -include pre.h "
    "-ccbin /usr/bin/g++ -Wall -g -lineinfo -stdlib=libc++"
)


def parse(command: str, directory: str = "/proj/build") -> cc.CommandFlags:
    return cc.parse_arguments(shlex.split(command), directory)


def write_db(folder: Path, entries: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "compile_commands.json"
    path.write_text(json.dumps(entries))
    return path


def test_every_flag_kind_is_read_and_the_rest_dropped():
    f = parse(CMAKE_COMMAND)
    assert f.include_dirs == ("/proj/include", "/abs/inc", "/proj/build/inc3", "/proj/build/inc4")
    assert f.system_include_dirs == ("/opt/sys", "/proj/build/sys2", "/proj/build/sys3")
    # -Xcompiler -DHOST_ONLY is the host compiler's: not a define for the device compile.
    assert f.defines == ("FOO=1", "BAR", "NDEBUG")
    assert f.undefines == ("BAZ",)
    assert f.std == "c++17"  # gnu++17 is c++17 to NVRTC; -stdlib=libc++ is not a -std
    assert f.relaxed_constexpr and f.extended_lambda
    # -gencode codes (a PTX-only code names its arch too), -arch, --gpu-architecture; `native` none.
    assert f.archs == ("sm_80", "sm_90a", "sm_86", "sm_75", "sm_89")
    assert f.extra == (
        "--maxrregcount=64",
        "--use_fast_math",
        "--relocatable-device-code=true",
        "--pre-include=/proj/build/pre.h",
    )


def test_defines_and_undefines_take_effect_in_their_order():
    """The preprocessor applies -D and -U in command-line order (gcc's manual; nvcc likewise):
    `-UX -DX` leaves X defined, `-DX -UX` undefined. The backends pass every -D before every -U,
    so the parse keeps each name in one list only."""
    f = parse("nvcc -UA -DA -DB=1 -UB -DC=1 -UC -DC=2 -UD -UD -DE --undefine-macro=E --define-macro E=3 -c a.cu")
    assert f.defines == ("A", "C=2", "E=3")
    assert f.undefines == ("B", "D")
    # A function-like define is undone by a -U of its name.
    assert parse("nvcc -DF(x)=x -UF -c a.cu").defines == ()


def test_a_settings_define_undoes_the_databases_undefine(tmp_path):
    write_db(tmp_path, [{"directory": ".", "command": "nvcc -UFLAG -UOTHER -c a.cu", "file": "a.cu"}])
    a = str(tmp_path / "a.cu")
    settings, _ = settings_from_dict({"defines": ["FLAG=2"]})
    options = settings.compile_options("sm_80", str(tmp_path), settings.project_flags(a, str(tmp_path)).flags)
    assert options.defines == ("FLAG=2",) and options.undefines == ("OTHER",)


def test_undefine_then_define_from_a_database_compiles_as_nvcc_does(tmp_path, capsys):
    """`-UX -DX` in the database: X is defined for the check, as for nvcc (an `#error` under
    `#ifndef X` would be a false error otherwise); `-DY -UY`: Y is not."""
    (tmp_path / "k.cu").write_text(
        "#ifndef X\n#error X is not defined\n#endif\n"
        "#ifdef Y\n#error Y is defined\n#endif\n"
        "__global__ void k(int* p) { *p = X; }\n"
    )
    write_db(tmp_path, [{"directory": ".", "command": "nvcc -UX -DX -DY -UY -c k.cu", "file": "k.cu"}])
    code = main(["check", str(tmp_path / "k.cu")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "is not defined" not in out and "is defined" not in out


def test_the_dropped_flags_leave_nothing_behind():
    f = parse(
        "nvcc -c a.cu -o x.o -O3 -g -G -MD -MF x.d -Xptxas -v -Xcompiler -Wall -t 4 -ccbin g++ -lineinfo"
    )
    # What is kept of it: the compiler and what it makes (-c: an object, so the host pass runs).
    assert f == cc.CommandFlags(compiler="nvcc", output="object")


@pytest.mark.parametrize(
    ("command", "compiler", "output"),
    [
        ("/usr/local/cuda/bin/nvcc -c a.cu -o a.o", "nvcc", "object"),
        ("nvcc a.cu -o app", "nvcc", "object"),  # compiled and linked: the host pass runs
        ("ccache /opt/cuda/bin/nvcc --ptx a.cu -o a.ptx", "nvcc", "ptx"),
        ("nvcc -cubin -arch=sm_90 a.cu", "nvcc", "cubin"),
        ("nvcc --fatbin a.cu", "nvcc", "fatbin"),
        ("nvcc -dc a.cu", "nvcc", "object"),
        ("clang++ -x cuda --cuda-gpu-arch=sm_80 -c a.cu", "clang++", "object"),
        ("clang++ -x cuda a.cu", "clang++", ""),  # clang says nothing of a host pass without -c
    ],
)
def test_the_compiler_and_what_it_makes_are_kept(command, compiler, output):
    f = parse(command)
    assert (f.compiler, f.output) == (compiler, output)


def test_arguments_and_command_agree(tmp_path):
    args = shlex.split(CMAKE_COMMAND)
    write_db(tmp_path / "build", [{"directory": ".", "arguments": args, "file": "../src/a.cu"}])
    by_args = cc.flags_for(str(tmp_path / "src" / "a.cu")).flags
    write_db(tmp_path / "build", [{"directory": ".", "command": CMAKE_COMMAND, "file": "../src/a.cu"}])
    by_command = cc.flags_for(str(tmp_path / "src" / "a.cu")).flags
    assert by_args is not None and by_args == by_command


def test_relative_directory_and_paths_resolve_from_the_json(tmp_path):
    # `directory` relative to the json's folder, `file` and -I relative to `directory`.
    write_db(
        tmp_path / "build",
        [{"directory": "../out", "command": "nvcc -I../include -c ../src/a.cu", "file": "../src/a.cu"}],
    )
    lookup = cc.flags_for(str(tmp_path / "src" / "a.cu"))
    assert lookup.flags is not None and not lookup.borrowed
    assert lookup.flags.include_dirs == (str(tmp_path / "include"),)
    assert lookup.flags.file == str(tmp_path / "src" / "a.cu")
    assert lookup.database == str(tmp_path / "build" / "compile_commands.json")


def test_response_files_count_as_written(tmp_path):
    # CMake puts a target's include folders into an --options-file.
    rsp = tmp_path / "build" / "CMakeFiles" / "t.dir" / "includes_CUDA.rsp"
    rsp.parent.mkdir(parents=True)
    rsp.write_text("-I/src/include -isystem /opt/x\n")
    f = parse(
        "nvcc -DX --options-file CMakeFiles/t.dir/includes_CUDA.rsp @missing.rsp -c a.cu",
        str(tmp_path / "build"),
    )
    assert (
        f.include_dirs == ("/src/include",) and f.system_include_dirs == ("/opt/x",) and f.defines == ("X",)
    )


def test_finder_looks_upward_and_in_build_folders_and_stops_at_the_root(tmp_path):
    src = tmp_path / "proj" / "src" / "deep"
    src.mkdir(parents=True)
    target = str(src / "k.cu")
    assert cc.find_database(target) is None or not cc.find_database(target).startswith(str(tmp_path))
    build_debug = write_db(tmp_path / "proj" / "build-debug", [])
    assert cc.find_database(target) == str(build_debug)
    build = write_db(tmp_path / "proj" / "build", [])
    assert cc.find_database(target) == str(build)  # `build` before other build* folders
    direct = write_db(tmp_path / "proj" / "src", [])
    assert cc.find_database(target) == str(direct)  # the nearest folder wins
    # The workspace root ends the search: a database above it is not this workspace's.
    assert cc.find_database(target, root=str(src)) is None


def test_a_named_database_wins_and_a_missing_one_is_a_problem(tmp_path):
    write_db(
        tmp_path / "build", [{"directory": ".", "command": "nvcc -DFOUND -c ../a.cu", "file": "../a.cu"}]
    )
    other = write_db(
        tmp_path / "elsewhere",
        [{"directory": str(tmp_path), "command": "nvcc -DNAMED -c a.cu", "file": "a.cu"}],
    )
    a = str(tmp_path / "a.cu")
    assert cc.flags_for(a).flags.defines == ("FOUND",)
    assert cc.flags_for(a, named=str(other.parent)).flags.defines == ("NAMED",)  # a folder
    assert cc.flags_for(a, named=str(other)).flags.defines == ("NAMED",)  # the file
    missing = cc.flags_for(a, named=str(tmp_path / "nope.json"))
    assert missing.flags is None and "nope.json, which does not exist" in missing.problem


def test_a_file_without_an_entry_borrows_its_folders_then_its_nearest_ancestors(tmp_path):
    write_db(
        tmp_path / "build",
        [
            {"directory": ".", "command": "nvcc -DSRC_B -c ../src/b.cu", "file": "../src/b.cu"},
            {"directory": ".", "command": "nvcc -DSRC_A -c ../src/a.cu", "file": "../src/a.cu"},
            {"directory": ".", "command": "nvcc -DTOOLS -c ../src/tools/t.cu", "file": "../src/tools/t.cu"},
        ],
    )
    own = cc.flags_for(str(tmp_path / "src" / "b.cu"))
    assert own.flags.defines == ("SRC_B",) and not own.borrowed
    # Same folder: a sibling's entry (by name, not the json's order).
    sibling = cc.flags_for(str(tmp_path / "src" / "new.cuh"))
    assert sibling.borrowed and sibling.flags.defines == ("SRC_A",)
    # include/ has no entries: the nearest ancestor with files under it, its shallowest file.
    header = cc.flags_for(str(tmp_path / "include" / "helper.cuh"))
    assert header.borrowed and header.flags.defines == ("SRC_A",)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[{"directory": ".", "file": "a.cu", "command": "nvcc"', "is not valid JSON: "),
        ('{"file": "a.cu"}', "must hold a JSON list of entries, not a dict"),
        (
            '[{"directory": ".", "file": "a.cu"}]',
            "has no usable entry (entry 1: has neither `arguments` nor `command`)",
        ),
        (b"\xff\xfe[]", "is not UTF-8 text"),
    ],
)
def test_a_malformed_database_is_one_clear_diagnostic_and_the_file_is_still_checked(tmp_path, text, says):
    kernel = tmp_path / "src" / "k.cu"
    kernel.parent.mkdir()
    kernel.write_text('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n')
    db = tmp_path / "build" / "compile_commands.json"
    db.parent.mkdir()
    db.write_bytes(text if isinstance(text, bytes) else text.encode())
    check = check_path(str(kernel), Settings(arch=("sm_90",)))
    assert [(d.path, d.line, d.severity, d.code) for d in check.diagnostics] == [
        (str(kernel), 1, Severity.WARNING, "compile-commands")
    ]
    message = check.diagnostics[0].message
    assert str(db) in message and says in message and "checking with the settings' flags only" in message
    assert [k.name for k in check.kernels] == ["k"]


def test_an_entry_that_cannot_be_split_is_reported_on_its_file(tmp_path):
    write_db(
        tmp_path,
        [
            {"directory": ".", "command": "nvcc -DOK -c good.cu", "file": "good.cu"},
            {"directory": ".", "command": "nvcc -D'unbalanced -c bad.cu", "file": "bad.cu"},
        ],
    )
    assert cc.flags_for(str(tmp_path / "good.cu")).flags.defines == ("OK",)
    bad = cc.flags_for(str(tmp_path / "bad.cu"))
    assert bad.flags is None and "its `command` cannot be split" in bad.problem


def test_parsed_databases_are_cached_by_mtime_and_size(tmp_path):
    db = write_db(tmp_path, [{"directory": ".", "command": "nvcc -DONE -c a.cu", "file": "a.cu"}])
    first = cc.load_database(str(db))
    assert cc.load_database(str(db)) is first
    db.write_text(json.dumps([{"directory": ".", "command": "nvcc -DTWO_TWO -c a.cu", "file": "a.cu"}]))
    second = cc.load_database(str(db))
    assert second is not first and second.entries[str(tmp_path / "a.cu")].defines == ("TWO_TWO",)


def test_settings_add_to_the_database_and_archs_follow_it_unless_set(tmp_path):
    write_db(
        tmp_path / "build",
        [
            {
                "directory": ".",
                "command": "nvcc -I../include -DFROM_DB -UOLD --expt-relaxed-constexpr -std=c++20 "
                "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -c ../a.cu",
                "file": "../a.cu",
            }
        ],
    )
    a = str(tmp_path / "a.cu")
    settings, _ = settings_from_dict({"includeDirs": ["extra"], "defines": ["FROM_SETTINGS"]})
    project = settings.project_flags(a, str(tmp_path)).flags
    assert settings.archs(project) == ["sm_80", "sm_90"]
    options = settings.compile_options("sm_80", str(tmp_path), project)
    assert options.include_dirs == (str(tmp_path / "include"), str(tmp_path / "extra"))
    assert options.defines == ("FROM_DB", "FROM_SETTINGS")
    assert options.undefines == ("OLD",) and options.relaxed_constexpr and options.std == "c++20"
    explicit, _ = settings_from_dict({"arch": "sm_75"})
    assert explicit.archs(project) == ["sm_75"]


def test_archs_this_cuda_cannot_compile_for_are_left_out():
    settings = Settings()
    old_and_new = cc.parse_arguments(["nvcc", "-gencode", "arch=compute_60,code=sm_60", "-arch=sm_80"], "/")
    assert settings.archs(old_and_new) == ["sm_80"]
    only_old = cc.parse_arguments(["nvcc", "-arch=sm_60"], "/")
    assert settings.archs(only_old) == settings.archs()
    assert cc.parse_arguments(["nvcc", "-std=c++2a"], "/").std == "c++20"


def test_checks_compile_with_the_databases_flags(tmp_path):
    # A device-only file that compiles only with the project's -I and -D.
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "scale.cuh").write_text("#define SCALE_BY(x) ((x) * FACTOR)\n")
    kernel = tmp_path / "src" / "k.cu"
    kernel.parent.mkdir()
    kernel.write_text(
        '#include "scale.cuh"\nextern "C" __global__ void k(float* x) { x[0] = SCALE_BY(x[0]); }\n'
    )
    settings = Settings(arch=("auto",))
    alone = check_path(str(kernel), settings)
    assert alone.errors, "without the database the include must not resolve"
    write_db(
        tmp_path / "build",
        [
            {
                "directory": ".",
                "command": "nvcc -I../include -DFACTOR=2.0f -gencode arch=compute_80,code=sm_80 "
                "-gencode arch=compute_90,code=sm_90 -c ../src/k.cu -o k.o",
                "file": "../src/k.cu",
            }
        ],
    )
    check = check_path(str(kernel), settings)
    assert check.diagnostics == []
    assert sorted(r.arch for r in check.results) == ["sm_80", "sm_90"]
    assert {(k.name, k.arch) for k in check.kernels} == {("k", "sm_80"), ("k", "sm_90")}


def test_cli_flag_names_the_database(tmp_path, capsys):
    kernel = tmp_path / "k.cu"
    kernel.write_text('extern "C" __global__ void k(float* x) { x[0] = FACTOR; }\n')
    db = write_db(
        tmp_path / "elsewhere",
        [{"directory": str(tmp_path), "command": "nvcc -DFACTOR=3 -c k.cu", "file": "k.cu"}],
    )
    assert main(["--check", "--no-gpu", "--arch", "sm_90", str(kernel)]) == 1
    capsys.readouterr()
    assert (
        main(["check", "-v", "--no-gpu", "--arch", "sm_90", "--compile-commands", str(db), str(kernel)]) == 0
    )
    out = capsys.readouterr().out
    assert "kernel k [sm_90]" in out and "0 error(s), 0 warning(s)" in out


def test_the_cmake_samples_committed_database_gives_the_projects_flags():
    blur = CMAKE_SAMPLE / "src" / "blur.cu"
    lookup = cc.flags_for(str(blur))
    assert lookup.database == str(CMAKE_SAMPLE / "build" / "compile_commands.json")
    assert lookup.flags.include_dirs == (str(CMAKE_SAMPLE / "include"),)
    assert lookup.flags.defines == ("BLUR_BLOCK=256", "BLUR_RADIUS=2")
    assert lookup.flags.archs == ("sm_80", "sm_90") and lookup.flags.relaxed_constexpr
    header = cc.flags_for(str(CMAKE_SAMPLE / "include" / "vec_math.cuh"))
    assert header.borrowed and header.flags.defines == lookup.flags.defines


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_the_committed_database_matches_what_cmake_writes(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (neither the nvidia-cuda-nvcc wheel nor one on PATH)")
    project = tmp_path / "cmake_project"
    shutil.copytree(CMAKE_SAMPLE, project, ignore=shutil.ignore_patterns("build"))
    done = subprocess.run(
        ["cmake", "-S", str(project), "-B", str(project / "build"), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
         f"-DCMAKE_CUDA_COMPILER={nvcc}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cmake could not configure CUDA here: {done.stderr.strip().splitlines()[-1:]}")
    for name in ("blur.cu", "main.cu"):
        generated = cc.flags_for(str(project / "src" / name)).flags
        committed = cc.flags_for(str(CMAKE_SAMPLE / "src" / name)).flags
        assert generated is not None and committed is not None
        assert generated.include_dirs == (str(project / "include"),)
        for field in ("defines", "undefines", "archs", "relaxed_constexpr", "extended_lambda", "extra"):
            assert getattr(generated, field) == getattr(committed, field), field
        # CMake leaves -std out where the compiler's default is the requested standard.
        assert generated.std in (None, "c++17") and committed.std is None


def test_the_servers_result_cache_follows_headers_found_through_the_database(tmp_path):
    # An open file's cached result must not outlive an edit to a header that only the
    # database's -I folder finds.
    from kernel_lsp.workspace import Workspace

    (tmp_path / "include").mkdir()
    header = tmp_path / "include" / "op.cuh"
    header.write_text("#define OP(x) (x)\n")
    kernel = tmp_path / "src" / "k.cu"
    kernel.parent.mkdir()
    text = '#include "op.cuh"\n'
    kernel.write_text(text)
    write_db(
        tmp_path / "build",
        [{"directory": ".", "command": "nvcc -I../include -c ../src/k.cu", "file": "../src/k.cu"}],
    )
    workspace = Workspace(root=str(tmp_path), base=Settings())
    before, _ = workspace.check_key(str(kernel), text)
    assert before is not None and workspace.check_key(str(kernel), text)[0] == before
    header.write_text("#define OP(x) ((x) * 2)\n")
    assert workspace.check_key(str(kernel), text)[0] != before


def test_the_upward_search_lists_a_folder_again_only_when_it_changed(tmp_path, monkeypatch):
    # Each check searched every ancestor folder with listdir (0.9 ms a search under /tmp, three
    # per check, on every save); a folder's scan is now kept while its mtime and its build*
    # folders' mtimes stay, and a database added in either is still found.
    proj, src = tmp_path / "proj", tmp_path / "proj" / "src"
    (proj / "build").mkdir(parents=True)
    src.mkdir()
    target = str(src / "k.cu")
    old = 1_000_000_000  # long ago: out of the racy window, so the scans are kept
    for folder in (tmp_path, proj, proj / "build", src):
        os.utime(folder, (old, old))
    listed: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(cc.os, "listdir", lambda p: listed.append(str(p)) or real_listdir(p))
    first = cc.find_database(target, root=str(tmp_path))
    assert first is None and str(src) in listed and str(proj) in listed
    listed.clear()
    assert cc.find_database(target, root=str(tmp_path)) is None
    assert listed == []  # nothing changed: no folder listed again
    made = write_db(proj / "build", [])  # changes build/'s mtime, not proj's
    assert cc.find_database(target, root=str(tmp_path)) == str(made)
    direct = write_db(src, [])  # changes src's mtime
    assert cc.find_database(target, root=str(tmp_path)) == str(direct)
    os.remove(direct)
    assert cc.find_database(target, root=str(tmp_path)) == str(made)
