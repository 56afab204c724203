"""A header is checked in place, as the file it is: `#pragma once` and include guards hold when
headers include each other (a.cuh -> b.cuh -> c.cuh -> a.cuh), on both backends, for the text on
disk and for the editor's unsaved text; a header without a compile_commands.json entry takes its
includer's flags."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kernel_lsp.check import check_path, check_source
from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

# Three headers that include each other, as headers of one library do; `host` adds host code to
# c.cuh (a std::vector helper), which sends the headers to nvcc.
A = """#pragma once
#include "b.cuh"
struct A { int v; };
__device__ inline int fa(A a) { return a.v + 1; }
"""
B = """#pragma once
#include "c.cuh"
struct B { int v; };
"""
C = """#pragma once
#include "a.cuh"
struct C { int v; };
"""
HOST = "#include <vector>\ninline std::vector<int> host_c() { return {1, 2}; }\n"


def three_headers(folder: Path, host: bool = False, guards: bool = False) -> dict[str, Path]:
    texts = {"a.cuh": A, "b.cuh": B, "c.cuh": C + (HOST if host else "")}
    out = {}
    for name, text in texts.items():
        if guards:
            macro = name.replace(".", "_").upper()
            text = text.replace("#pragma once\n", f"#ifndef {macro}\n#define {macro}\n") + "#endif\n"
        (folder / name).write_text(text)
        out[name] = folder / name
    return out


def bare_nvcc_errors(header: Path, tmp_path: Path) -> int:
    assert TOOLCHAIN.nvcc
    out = subprocess.run(
        [TOOLCHAIN.nvcc, "-cubin", "-arch=sm_90", "-x", "cu", "-o", str(tmp_path / "h.cubin"), str(header)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return sum(": error" in line for line in (out.stdout + out.stderr).splitlines())


@pytest.mark.parametrize("host", [False, True], ids=["device-only (NVRTC)", "host code (nvcc)"])
@pytest.mark.parametrize("guards", [False, True], ids=["pragma once", "include guards"])
def test_mutually_including_headers_each_compile_alone(tmp_path, host, guards):
    # With host code in c.cuh, a.cuh and b.cuh (device-only text) go to nvcc too: NVRTC cannot
    # read <vector>, and the project builds them with nvcc.
    if host and TOOLCHAIN.problem:
        pytest.skip(TOOLCHAIN.problem)
    headers = three_headers(tmp_path, host=host, guards=guards)
    for path in headers.values():
        result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
        assert result.compiler == ("nvcc" if host else "nvrtc")
        assert result.ok and result.diagnostics == [], (path.name, result.diagnostics)


@needs_nvcc
def test_as_bare_nvcc_sees_each_header(tmp_path):
    headers = three_headers(tmp_path, host=True)
    for path in headers.values():
        assert bare_nvcc_errors(path, tmp_path) == 0
        assert check_path(str(path), Settings(arch=("sm_90",))).errors == 0


@pytest.mark.parametrize("host", [False, True], ids=["NVRTC", "nvcc"])
def test_a_real_error_in_a_cycle_is_reported_once_at_its_line(tmp_path, host):
    if host and TOOLCHAIN.problem:
        pytest.skip(TOOLCHAIN.problem)
    headers = three_headers(tmp_path, host=host)
    b = headers["b.cuh"]
    b.write_text(B.replace("struct B { int v; };", "struct B { int v; };\nstruct B { int w; };"))
    result = compile_source(b.read_text(), str(b), CompileOptions(arch="sm_90"))
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert [(d.path, d.line) for d in errors] == [(str(b), 4)]
    assert "already been defined" in errors[0].message


@pytest.mark.parametrize("host", [False, True], ids=["NVRTC", "nvcc"])
def test_the_unsaved_text_of_a_header_in_a_cycle_is_what_is_checked(tmp_path, host):
    if host and TOOLCHAIN.problem:
        pytest.skip(TOOLCHAIN.problem)
    headers = three_headers(tmp_path, host=host)
    a = headers["a.cuh"]
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    # The editor adds a field and uses it: had the disk's a.cuh been read too (through c.cuh),
    # A would be defined twice; had the disk's text been compiled, `w` would be unknown.
    unsaved = A.replace("struct A { int v; };", "struct A { int v; int w; };").replace("a.v + 1", "a.w + 1")
    clean = compile_source(unsaved, str(a), CompileOptions(arch="sm_90"))
    assert clean.ok and clean.diagnostics == [], clean.diagnostics
    broken = compile_source(unsaved.replace("a.w + 1", "a.z + 1"), str(a), CompileOptions(arch="sm_90"))
    (d,) = [d for d in broken.diagnostics if d.severity == Severity.ERROR]
    assert (d.path, d.line) == (str(a), 4) and '"z"' in d.message
    # Nothing was written beside the headers.
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


@needs_nvcc
def test_a_header_takes_its_includers_flags(tmp_path):
    # Two translation units with different flags; the header needs b.cu's define. Borrowing by
    # folder picks a.cu (the first by name); the includer names b.cu.
    (tmp_path / "include").mkdir()
    header = tmp_path / "include" / "needs_b.cuh"
    header.write_text(
        "#pragma once\n#include <cstdio>\n#ifndef FROM_B\n#error built without the flags of b\n#endif\n"
        'inline void hello() { printf("%d", FROM_B); }\n'
    )
    for unit in ("a", "b"):
        (tmp_path / f"src_{unit}").mkdir()
        (tmp_path / f"src_{unit}" / f"{unit}.cu").write_text(
            '#include "needs_b.cuh"\nint main() { return 0; }\n'
            if unit == "b"
            else "int main() { return 0; }\n"
        )
    entries = [
        {
            "directory": str(tmp_path),
            "file": str(tmp_path / f"src_{u}" / f"{u}.cu"),
            "arguments": [
                "nvcc",
                f"-I{tmp_path / 'include'}",
                *(["-DFROM_B=7"] if u == "b" else []),
                "-c",
                f"{u}.cu",
            ],
        }
        for u in ("a", "b")
    ]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    settings = Settings(arch=("sm_90",))
    alone = check_source(header.read_text(), str(header), settings)
    assert any("without the flags of b" in d.message for d in alone.diagnostics)
    with_includer = check_source(
        header.read_text(), str(header), settings, includers=((str(tmp_path / "src_b" / "b.cu"), None),)
    )
    # Compiled on its own with b.cu's flags: no error, and no need for b.cu's context either.
    assert with_includer.diagnostics == [], with_includer.diagnostics
