"""Defines reach nvcc with the meaning nvcc gives them (issue 33): a plain `-DNAME=value` goes on
nvcc's command line as written, before nvcc's own `-include cuda_runtime.h`, and only a value a
shell would read takes the pre-included header (tests/integration/test_security.py holds the hostile
values; a marker file must never appear here either).

Each behaviour is checked against nvcc itself: the same file and defines compiled by the wheel's
nvcc from an argument list (no shell of ours), and its errors compared with kernel-lsp's.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain
from kernel_lsp.compile.nvcc_args import NvccArgs, plain_define, split_macros
from kernel_lsp.model import Severity

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

# Every character a plain value may hold.
SAFE_VALUE = "azAZ09_.+-/:=x"

# Checks whose outcome depends on where the defines land: before cuda_runtime.h (nvcc) or after.
PROBE = textwrap.dedent(
    """\
    #include <cstdio>
    #include <cuda_fp16.h>
    #ifndef __CUDART_API_PER_THREAD_DEFAULT_STREAM
    #error per-thread default stream is off
    #endif
    #if _XOPEN_SOURCE != 700
    #error _XOPEN_SOURCE is not 700
    #endif
    #ifndef __CUDA_NO_HALF_OPERATORS__
    #error half operators are on
    #endif
    static_assert(PATHLIKE[0] == '/', "-DPATHLIKE is a string");
    __global__ void k(int* p) { *p = VERSION_MAJOR; }
    int main() { return 0; }
    """
)
DATABASE_DEFINES = (
    "CUDA_API_PER_THREAD_DEFAULT_STREAM=1",
    "_XOPEN_SOURCE=600",
    "__CUDA_NO_HALF_OPERATORS__",
    'PATHLIKE="/usr/share/x"',
    "VERSION_MAJOR=3",
)


def nvcc_errors(path: Path, defines: tuple[str, ...], undefines: tuple[str, ...] = ()) -> list[str]:
    """The `#error`/error lines nvcc itself prints for `path` with these -D/-U (argument list, no
    shell of ours; only values without shell text are given to it)."""
    assert TOOLCHAIN.nvcc is not None
    command = [TOOLCHAIN.nvcc, "-cubin", "-arch=sm_90", "-o", str(path.with_suffix(".cubin"))]
    command += [f"-D{d}" for d in defines] + [f"-U{u}" for u in undefines] + [str(path)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    # `k.cu:3:2: error: #error text` (the host preprocessor), `k.cu(3): error: text` (cudafe++).
    found = {m.group(1).strip() for m in re.finditer(r"error: (?:#error )?(.*)", out.stdout + out.stderr)}
    return sorted(found)


def kernel_lsp_errors(path: Path, defines: tuple[str, ...], undefines: tuple[str, ...] = ()) -> list[str]:
    options = CompileOptions(defines=defines, undefines=undefines, compiler="nvcc")
    result = compile_source(path.read_text(), str(path), options, use_cache=False)
    found = [d.message for d in result.diagnostics if d.severity == Severity.ERROR]
    return sorted({m.removeprefix("#error ").strip() for m in found})


def test_plain_defines_are_identifiers_with_values_no_shell_reads():
    for define in ("NDEBUG", "_XOPEN_SOURCE=600", "X=", "P=/usr/lib:a.b+c-d=e", "__CUDA_NO_HALF_OPERATORS__"):
        assert plain_define(define), define
    for define in (
        "X=1$(touch M)",
        "X=`touch M`",
        "X=a\\b",
        'X="s"',
        "X=a b",
        "X=1,2",  # nvcc splits -D values at commas
        "X=!x",
        "X=1\n2",
        "F(a)=a",
        "1X=2",
        "X-Y=1",
        "É=1",
    ):
        assert not plain_define(define), define


def test_only_names_with_shell_text_take_the_header_and_keep_their_order():
    flags, header_defines, header_undefines = split_macros(
        ("A=1", "B=$(x)", "B=2", "C", "F(a)=((a)*2)", "G=1"),
        ("B", "C", "G"),
    )
    # C and G: plain, -U after the -D's as on nvcc's own command line; B: every define of the name
    # in the header, in order, with its -U after them (a plain -DB=2 would lose to the header).
    assert flags == ["-DA=1", "-DC", "-DG=1", "-UC", "-UG"]
    assert header_defines == ("B=$(x)", "B=2", "F(a)=((a)*2)")
    assert header_undefines == ("B",)


def test_no_header_when_every_define_is_plain(tmp_path):
    safe = NvccArgs(str(tmp_path))
    assert safe.macros(("X=1", "Y"), ("Z",)) == ["-DX=1", "-DY", "-UZ"]
    assert safe.header is None and list(tmp_path.iterdir()) == []


@needs_nvcc
def test_nvcc_passes_every_plain_character_to_its_steps_unchanged(tmp_path):
    """The measurement behind the safe set: `nvcc -dryrun` (prints its steps, runs none) shows the
    value inside double quotes as it was given, and a comma split off as another define."""
    assert TOOLCHAIN.nvcc is not None
    (tmp_path / "k.cu").write_text("__global__ void k(int* p) { *p = 1; }\n")
    command = [TOOLCHAIN.nvcc, "-dryrun", "-c", "-arch=sm_90", f"-DV={SAFE_VALUE}", "-DZ=1,2", "k.cu"]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    steps = [line for line in (out.stdout + out.stderr).splitlines() if '"V=' in line]
    assert steps, out.stderr
    for step in steps:
        assert f'-D "V={SAFE_VALUE}"' in step
        assert '-D "Z=1" -D "2"' in step
    assert not any("$" in SAFE_VALUE or c in SAFE_VALUE for c in '`\\"!, ')


@needs_nvcc
def test_database_defines_mean_what_they_mean_to_nvcc(tmp_path):
    """-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1 and -D_XOPEN_SOURCE=600 act before cuda_runtime.h,
    as with nvcc (a pre-included header came after it: the per-thread stream was off and
    _XOPEN_SOURCE was 600, redefined)."""
    path = tmp_path / "probe.cu"
    path.write_text(PROBE)
    assert nvcc_errors(path, DATABASE_DEFINES) == []
    assert kernel_lsp_errors(path, DATABASE_DEFINES) == []
    # The checks can fail: without the defines both see the same errors (g++'s _GNU_SOURCE makes
    # _XOPEN_SOURCE 700 either way).
    without = ('PATHLIKE="/x"', "VERSION_MAJOR=1")
    expected = nvcc_errors(path, without)
    assert expected == ["half operators are on", "per-thread default stream is off"]
    assert kernel_lsp_errors(path, without) == expected


@needs_nvcc
def test_undefine_after_define_as_nvcc_does(tmp_path):
    path = tmp_path / "u.cu"
    path.write_text("#ifdef GONE\n#error GONE is defined\n#endif\n__global__ void k(int* p) { *p = 1; }\n")
    for defines, undefines in ((("GONE=1",), ("GONE",)), (("GONE=1",), ())):
        assert kernel_lsp_errors(path, defines, undefines) == nvcc_errors(path, defines, undefines)


@needs_nvcc
def test_values_with_quotes_spaces_and_equals_keep_their_meaning(tmp_path):
    """Values with a quote, a space or a comma take the header; nvcc itself, given them from an
    argument list, agrees on what they mean."""
    source = textwrap.dedent(
        """\
        #include <cstring>
        static_assert(sizeof(MSG) == sizeof("a b"), "a quoted value with a space");
        static_assert(PAIR == 2, "a comma inside parentheses");
        static_assert(EQ == 1, "an = in the value");
        __global__ void k(int* p) { *p = EQ; }
        int main() { return std::strcmp(MSG, "a b"); }
        """
    )
    path = tmp_path / "q.cu"
    path.write_text(source)
    defines = ('MSG="a b"', "PAIR=(1,2)", "EQ=(2==2)")
    assert kernel_lsp_errors(path, defines) == []
    # nvcc splits `PAIR=(1,2)` at its comma: it defines `2)` and PAIR as `(1`, and fails.
    assert nvcc_errors(path, ('MSG="a b"', "PAIR=2", "EQ=(2==2)")) == []


@needs_nvcc
def test_a_real_database_with_shell_text_runs_nothing_and_keeps_the_rest(tmp_path, capsys):
    """A compile_commands.json as CMake writes it: the plain defines act as nvcc's, the hostile one
    is a harmless value, and no marker file appears."""
    marker = tmp_path / "MARKER"
    (tmp_path / "probe.cu").write_text(PROBE.replace("VERSION_MAJOR", "(VERSION_MAJOR + EVIL)"))
    command = (
        "/usr/local/cuda/bin/nvcc -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1 -D_XOPEN_SOURCE=600 "
        "-D__CUDA_NO_HALF_OPERATORS__ '-DPATHLIKE=\"/usr/share/x\"' -DVERSION_MAJOR=3 "
        f"'-DEVIL=0/*$(touch {marker})`touch {marker}`*/' -c probe.cu -o probe.o"
    )
    entry = {"directory": str(tmp_path), "file": "probe.cu", "command": command}
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry]))
    code = main(["check", "--no-gpu", str(tmp_path / "probe.cu")])
    out = capsys.readouterr().out
    assert not marker.exists()
    assert code == 0, out
