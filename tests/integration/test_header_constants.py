"""Launch sizes from constants in the project's own headers and from `static constexpr` members
(issue 33): `<<<grid, kBlock>>>` with `constexpr int kBlock = 256;` in a header included with
quotes (beside the file, or in an include folder of its options), and `Config::kThreads`."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import find_toolchain
from kernel_lsp.constants import read_constants
from kernel_lsp.host_launch import headers as headers_module
from kernel_lsp.host_launch.headers import quoted_headers
from kernel_lsp.host_launch.launches import parse_host

needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")

CONFIG = """\
#pragma once
#include "base.cuh"
constexpr int kBlock = 256;
struct Config {
  static constexpr int kThreads = 128;
  static constexpr int kItems = kThreads * 4;   // a member through its sibling
  int per_object = 7;                            // no constant: each object's
};
namespace cfg {
constexpr int kWarps = kWarpSize / 4;           // through base.cuh
struct Tile { static const int kRows = 16; enum { kCols = 8 }; };
}
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
"""
BASE = "#pragma once\nconstexpr int kWarpSize = 32;\n"
LOCAL = "#pragma once\n#define LOCAL_BLOCK 512\nconstexpr int kLocal = LOCAL_BLOCK / 2;\n"
KERNELS = "".join(f"__global__ void {k}(float* x) {{ x[threadIdx.x] = 1; }}\n" for k in "abcdefgh")
MAIN = """\
#include <cstdio>
#include "config.cuh"
#include "local.cuh"
struct Here {{ static constexpr int kT = 64; }};
{kernels}
int main(int argc, char** argv) {{
  int n = 1 << 20;
  a<<<ceil_div(n, kBlock), kBlock>>>(nullptr);
  b<<<1, Config::kThreads>>>(nullptr);
  c<<<1, Here::kT>>>(nullptr);
  d<<<1, kLocal>>>(nullptr);
  e<<<1, cfg::kWarps * 32>>>(nullptr);
  f<<<1, dim3(cfg::Tile::kRows, cfg::Tile::kCols)>>>(nullptr);
  g<<<1, Config::kItems>>>(nullptr);
  h<<<1, ::kBlock / 2>>>(nullptr);
  return 0;
}}
"""
EXPECTED = {"a": 256, "b": 128, "c": 64, "d": 256, "e": 256, "f": 128, "g": 512, "h": 128}


def project(root: Path) -> Path:
    """k.cu beside local.cuh; config.cuh (and base.cuh, which it includes) in include/."""
    (root / "include").mkdir()
    (root / "include" / "config.cuh").write_text(CONFIG)
    (root / "include" / "base.cuh").write_text(BASE)
    (root / "local.cuh").write_text(LOCAL)
    (root / "k.cu").write_text(MAIN.format(kernels=KERNELS))
    return root / "k.cu"


def blocks(source: str, path: Path, include_dirs: tuple[str, ...] = (), defines: tuple[str, ...] = ()):
    host = parse_host(source, defines, quoted_headers(source, str(path), include_dirs))
    return {x.kernel: x.block.total for x in host.launches}


def test_static_constexpr_members_and_namespaces_by_their_qualified_names():
    c = read_constants(BASE + CONFIG)
    assert c.value("kBlock") == 256 and c.value("kWarpSize") == 32
    for name, value in {
        "Config::kThreads": 128,
        "Config::kItems": 512,
        "::kBlock": 256,
        "cfg::kWarps": 8,
        "kWarps": 8,  # a namespace's constant keeps its plain name, as before
        "cfg::Tile::kRows": 16,
        "Tile::kRows": 16,  # written inside namespace cfg
        "cfg::Tile::kCols": 8,
    }.items():
        assert c.evaluate(name) == value, name
    # Not constants: a member outside its class, an object's member, a function's local.
    assert c.evaluate("kThreads") is None and c.evaluate("Config::per_object") is None
    inside = read_constants("void f() { struct L { static constexpr int k = 3; }; }")
    assert inside.evaluate("L::k") is None
    # Plain names (what specs and the tuner read) are unchanged: no qualified keys among them.
    assert not any("::" in name for name in c.values())


def test_launches_read_constants_of_quoted_headers_here_and_in_include_folders(tmp_path):
    path = project(tmp_path)
    source = path.read_text()
    assert blocks(source, path, (str(tmp_path / "include"),)) == EXPECTED
    # Without the include folder config.cuh is not found: its launches say where they looked.
    host = parse_host(source, (), quoted_headers(source, str(path)))
    (launch,) = [x for x in host.launches if x.kernel == "a"]
    assert launch.block.total is None
    assert "nor a constant of this file or of the headers it includes" in launch.block.reason


def test_the_files_own_constants_and_defines_come_first(tmp_path):
    (tmp_path / "h.cuh").write_text("constexpr int kBlock = 1024;\nconstexpr int kFromD = BLOCK_D * 2;\n")
    path = tmp_path / "k.cu"
    source = (
        '#include "h.cuh"\nconstexpr int kBlock = 64;\n'
        + KERNELS
        + ("void go() { a<<<1, kBlock>>>(nullptr); b<<<1, kFromD>>>(nullptr); }\n")
    )
    assert blocks(source, path, defines=("BLOCK_D=96",)) == {"a": 64, "b": 192}


def test_angle_bracket_includes_are_read_from_the_projects_include_folders_only(tmp_path):
    path = project(tmp_path)
    source = path.read_text().replace('"config.cuh"', "<config.cuh>")
    # In an -I folder of the file's options: the project's header, read (issue 33).
    assert blocks(source, path, (str(tmp_path / "include"),)) == EXPECTED
    # Not beside the file for `<...>` (that is the quoted form's first place): unknown without -I.
    (tmp_path / "config.cuh").write_text(CONFIG)
    found = blocks(source, path)
    assert found["a"] is None and found["d"] == 256  # local.cuh is still quoted


def test_headers_that_include_each_other_are_read_once(tmp_path):
    (tmp_path / "a.cuh").write_text('#pragma once\n#include "b.cuh"\nconstexpr int kA = kB * 2;\n')
    (tmp_path / "b.cuh").write_text('#pragma once\n#include "a.cuh"\nconstexpr int kB = 64;\n')
    path = tmp_path / "k.cu"
    source = '#include "a.cuh"\n#include "k.cu"\n' + KERNELS + "void go() { a<<<1, kA>>>(nullptr); }\n"
    stamps = quoted_headers(source, str(path))
    assert [os.path.basename(p) for p, _, _ in stamps] == ["a.cuh", "b.cuh"]  # never the file itself
    assert blocks(source, path)["a"] == 128


def test_a_fifo_or_a_huge_header_is_never_waited_on_nor_read_whole(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "pipe.cuh")
    (tmp_path / "big.cuh").write_text(
        "constexpr int kEarly = 32;\n" + "// padding\n" * 2000 + "constexpr int kLate = 64;\n"
    )
    path = tmp_path / "k.cu"
    source = (
        '#include "pipe.cuh"\n#include "big.cuh"\n'
        + KERNELS
        + ("void go() { a<<<1, kEarly>>>(nullptr); b<<<1, kLate>>>(nullptr); }\n")
    )
    monkeypatch.setattr(headers_module, "MAX_HEADER_TEXT", 4096)
    headers_module._text.cache_clear()
    done: dict = {}
    worker = threading.Thread(target=lambda: done.update(blocks(source, path)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    headers_module._text.cache_clear()
    assert not worker.is_alive(), "a FIFO header was waited on"
    assert done == {"a": 32, "b": None}  # the prefix holds kEarly; kLate lies past the limit


def test_at_most_max_headers_are_followed(tmp_path, monkeypatch):
    monkeypatch.setattr(headers_module, "MAX_HEADERS", 3)
    for i in range(6):
        (tmp_path / f"h{i}.cuh").write_text(f'#include "h{i + 1}.cuh"\nconstexpr int k{i} = {i + 1};\n')
    path = tmp_path / "k.cu"
    assert len(quoted_headers('#include "h0.cuh"\n', str(path))) == 3


@needs_nvcc
def test_check_reports_occupancy_at_the_header_constants(tmp_path, capsys):
    """End to end: the project's compile_commands.json names the include folder; every launch
    has its block size, and the text report says where it came from."""
    path = project(tmp_path)
    command = f"nvcc -I{tmp_path / 'include'} -arch=sm_90 -c k.cu"
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "k.cu", "command": command}])
    )
    assert main(["check", "--no-gpu", "--format", "json", str(path)]) == 0
    kernels = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    assert {k["name"]: k["blockSize"] for k in kernels} == EXPECTED
    assert main(["check", "--no-gpu", "-v", str(path)]) == 0
    out = capsys.readouterr().out
    assert "kernel b [sm_90]:" in out and "occupancy 100% at 128 threads/block" in out
    assert "occupancy: unknown" not in out


def test_headers_are_read_only_for_a_name_the_file_lacks(tmp_path):
    """Most launches use the file's own constants: its headers are then never parsed."""
    from kernel_lsp.host_launch.headers import with_headers

    (tmp_path / "h.cuh").write_text("constexpr int kFar = 96;\n#define HALF(x) ((x) / 2)\n")
    source = '#include "h.cuh"\nconstexpr int kNear = 32;\n'
    constants = with_headers(read_constants(source), quoted_headers(source, str(tmp_path / "k.cu")))
    assert constants.evaluate("kNear * 2") == 64 and constants.loader is not None  # not read
    assert constants.evaluate("HALF(kFar)") == 48 and constants.loader is None  # read, once
    assert [os.path.basename(c.origin) for c in constants.included] == ["h.cuh"]
