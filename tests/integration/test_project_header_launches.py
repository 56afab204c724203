"""Launch shapes from the project's own headers as real projects write them (issue 33, item 6):
`#include <tk/config.cuh>` found through an `-I` of compile_commands.json, a launch comment whose
block is a header's constant, and a struct's `static constexpr` member read through an object or
a parameter of that struct type (`cfg.kThreads`), never as the zero of a `{}`-initialised object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import find_toolchain
from kernel_lsp.host_launch import headers as headers_module
from kernel_lsp.host_launch.headers import project_headers
from kernel_lsp.host_launch.launches import parse_host

needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")

CONFIG = """\
#pragma once
namespace tk {
constexpr int kBlock = 256;
struct Cfg { static constexpr int kThreads = 128; int n = 0; };
}  // namespace tk
"""
KERNELS = "".join(f"__global__ void {k}(float* x) {{ x[threadIdx.x] = 1; }}\n" for k in "abcdef")
MAIN = """\
#include <cstdio>
#include <tk/config.cuh>
// kernel-lsp: launch c grid=1 block=kBlock
{kernels}
using namespace tk;
void run(const Cfg& cfg, int n) {{
  e<<<1, cfg.kThreads>>>(nullptr);
  f<<<1, cfg.n>>>(nullptr);
}}
int main() {{
  a<<<1, kBlock>>>(nullptr);
  b<<<1, tk::Cfg::kThreads>>>(nullptr);
  constexpr Cfg cfg{{}};
  d<<<1, cfg.kThreads>>>(nullptr);
  run(cfg, 3);
  return 0;
}}
"""


def project(root: Path) -> Path:
    (root / "include" / "tk").mkdir(parents=True)
    (root / "include" / "tk" / "config.cuh").write_text(CONFIG)
    (root / "src").mkdir()
    (root / "src" / "k.cu").write_text(MAIN.format(kernels=KERNELS))
    return root / "src" / "k.cu"


def host_blocks(path: Path, include_dirs: tuple[str, ...]) -> dict:
    source = path.read_text()
    host = parse_host(source, (), project_headers(source, str(path), include_dirs))
    return {x.kernel: x.block for x in host.launches}


def test_angle_bracket_project_header_through_an_include_folder(tmp_path):
    path = project(tmp_path)
    found = host_blocks(path, (str(tmp_path / "include"),))
    assert {k: q.total for k, q in found.items() if k in "abd"} == {"a": 256, "b": 128, "d": 128}
    # Without the -I the header is not found: unknown, and saying so (not a guess, not 0).
    missing = host_blocks(path, ())
    assert missing["a"].total is None and missing["b"].total is None and missing["d"].total is None


def test_a_structs_static_member_through_an_object_or_a_parameter_is_no_field(tmp_path):
    path = project(tmp_path)
    found = host_blocks(path, (str(tmp_path / "include"),))
    assert found["d"].total == 128  # `constexpr Cfg cfg{};` then `cfg.kThreads`: not 0
    assert found["e"].total == 128  # `const Cfg& cfg` parameter: a static member needs no object
    assert found["f"].total is None  # `cfg.n` is each object's field: a runtime value


def test_headers_of_library_trees_are_never_read_even_through_an_include_folder(tmp_path):
    lib = tmp_path / "venv" / "lib" / "site-packages" / "nvidia" / "include"
    lib.mkdir(parents=True)
    (lib / "lib.h").write_text("constexpr int kLib = 64;\n")
    (tmp_path / "k.cu").write_text("#include <lib.h>\n")
    assert project_headers("#include <lib.h>\n", str(tmp_path / "k.cu"), (str(lib),)) == ()
    assert headers_module._in_library("/usr/local/cuda-12.4/targets/x86_64-linux/include/cuda.h")
    assert not headers_module._in_library(str(tmp_path / "include" / "tk" / "config.cuh"))


@needs_nvcc
def test_check_resolves_every_launch_with_the_databases_include_folder(tmp_path, capsys):
    path = project(tmp_path)
    command = f"nvcc -I{tmp_path / 'include'} -arch=sm_90 -c src/k.cu"
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "src/k.cu", "command": command}])
    )
    assert main(["check", "--no-gpu", "--format", "json", str(path)]) == 0
    kernels = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    blocks = {k["name"]: k["blockSize"] for k in kernels}
    assert blocks == {"a": 256, "b": 128, "c": 256, "d": 128, "e": 128, "f": None}
    assert main(["check", "--no-gpu", "-v", str(path)]) == 0
    out = capsys.readouterr().out
    assert "kernel c [sm_90]:" in out and "block 256 from the launch comment at line 3" in out
    assert "a block of 0 threads" not in out
