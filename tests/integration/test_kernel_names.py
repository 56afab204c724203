"""Template instances and overloads each get their own name and definition line, on either
backend, in the CLI's text and JSON (issue 14 items 6 and 17; issue 11 item 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain
from kernel_lsp.model import Severity
from kernel_lsp.source import find_kernels

FILE = Path(__file__).parents[1] / "fixtures" / "real_projects" / "device_only" / "overloads_and_instances.cu"


def test_overloads_and_instances_through_nvrtc():
    result = compile_source(FILE.read_text(), str(FILE), CompileOptions(arch="sm_90"))
    assert result.compiler == "nvrtc" and result.ok
    assert [(k.name, k.function, k.line) for k in result.kernels] == [
        ("relu(float*, int)", "relu", 5),
        ("relu(double*, int)", "relu", 9),
        ("axpy<double, 128>", "axpy", 16),
        ("axpy<float, 256>", "axpy", 16),
    ]


def test_find_kernels_keeps_overloads_and_drops_instantiations():
    kernels = find_kernels(FILE.read_text())
    assert [(k.name, k.line, k.params[0].type) for k in kernels] == [
        ("relu", 5, "float*"),
        ("relu", 9, "double*"),
        ("axpy", 16, "T"),
    ]


def test_the_same_definition_in_if_else_branches_counts_once():
    src = (
        "#ifdef FAST\n__global__ void k(float* x) { x[0] = 1; }\n"
        "#else\n__global__ void k(float* x) { x[0] = 2; }\n#endif\n"
    )
    assert [(k.name, k.line) for k in find_kernels(src)] == [("k", 4)]


def test_cli_text_and_json_tell_them_apart(capsys):
    assert main(["check", "-v", "--arch", "sm_90", str(FILE)]) == 0
    out = capsys.readouterr().out
    rel = os.path.relpath(FILE)
    # The relu overloads are in namespace act: reports keep it (issue 33).
    for name in (
        "act::relu(float*, int)",
        "act::relu(double*, int)",
        "axpy<double, 128>",
        "axpy<float, 256>",
    ):
        assert f"{rel}: kernel {name} [sm_90]:" in out
    main(["--check", "--arch", "sm_90", "--format", "json", str(FILE)])
    kernels = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    assert {(k["name"], k["function"], k["line"]) for k in kernels} == {
        ("act::relu(float*, int)", "relu", 5),
        ("act::relu(double*, int)", "relu", 9),
        ("axpy<double, 128>", "axpy", 16),
        ("axpy<float, 256>", "axpy", 16),
    }


def test_code_actions_on_an_overload_line_are_for_that_kernel():
    from kernel_lsp.server.requests.code_action import _kernels_at

    source = FILE.read_text()
    # 0-based lines of the two relu definitions (5 and 9) and of the template (16).
    assert [(k.name, k.line) for k in _kernels_at(source, 4)] == [("relu", 5)]
    assert [(k.name, k.line, k.params[0].type) for k in _kernels_at(source, 8)] == [("relu", 9, "double*")]
    assert [(k.name, k.line) for k in _kernels_at(source, 15)] == [("axpy", 16)]


def test_hover_rows_are_named_when_instances_share_the_word():
    from kernel_lsp.server.requests.hover import resources_markdown

    result = compile_source(FILE.read_text(), str(FILE), CompileOptions(arch="sm_90"))
    axpy = [k for k in result.kernels if k.source_function == "axpy"]
    text = resources_markdown("axpy", axpy, result.compiler)
    assert "| `axpy<float, 256>` | sm_90 |" in text and "| `axpy<double, 128>` | sm_90 |" in text
    assert "compiled with NVRTC" in text
    single = [k for k in result.kernels if k.name == "axpy<float, 256>"]
    assert resources_markdown("axpy", single).startswith("**`axpy<float, 256>`**")


NAMESPACES = """\
namespace a { __global__ void k(float* x) { x[0] = 1; } }
namespace b {
struct S { int v; };
__global__ void k(float* x) { x[0] = 2; }
}
namespace c::d { __global__ void r(float* x) {} __global__ void r(int* x) {} }
namespace { __global__ void hidden(float* x) {} }
"""


def test_same_name_in_two_namespaces_gets_the_namespace_and_its_own_line():
    kernels = find_kernels(NAMESPACES)
    assert [(k.name, k.namespace, k.line) for k in kernels] == [
        ("k", "a", 1),
        ("k", "b", 4),
        ("r", "c::d", 6),
        ("r", "c::d", 6),
        ("hidden", "", 7),
    ]
    result = compile_source(NAMESPACES, "/tmp/kernel_lsp_namespaces.cu", CompileOptions(arch="sm_90"))
    assert result.ok, result.diagnostics
    assert sorted((k.name, k.line) for k in result.kernels) == [
        ("a::k", 1),
        ("b::k", 4),
        ("hidden", 7),
        ("r(float*)", 6),
        ("r(int*)", 6),
    ]


MANGLED = Path(__file__).parents[1] / "fixtures" / "mangled"


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
@pytest.mark.parametrize("name", ["pointer_args.cu", "lambda_kernels.cu", "cub_kernels.cu"])
def test_every_kernel_nvcc_emits_is_named_without_its_symbol(name):
    # Function and member pointers as template arguments, lambdas, CUB's policy types: each
    # kernel by its readable instance, the symbol kept in `mangled` only.
    path = MANGLED / name
    # As a device-only build (`nvcc -cubin`) makes them: nvcc -c cannot build pointer_args.cu,
    # whose host pass rejects the launch stub nvcc writes for `read_table<&ops::table>`
    # (test_the_host_pass_of_nvccs_own_stubs_is_the_files_error).
    options = CompileOptions(arch="sm_90", extended_lambda=True, build_output="cubin")
    result = compile_source(path.read_text(), str(path), options)
    assert result.ok and result.compiler == "nvcc", result.diagnostics
    corpus = set((MANGLED / "symbols.txt").read_text().split())
    assert result.kernels and {k.mangled for k in result.kernels} <= corpus
    for k in result.kernels:
        assert "_Z" not in k.name and "<?>" not in k.name, k.name
    names = {k.name for k in result.kernels}
    assert len(names) == len(result.kernels)
    if name == "pointer_args.cu":
        assert {
            "apply<&ops::square>",
            "fold<float, &ops::add<float>>",
            "field<ops::Particle, &ops::Particle::y>",
        } <= names
    if name == "cub_kernels.cu":
        single_tile = [k for k in result.kernels if k.function == "DeviceReduceSingleTileKernel"]
        assert single_tile and all(k.name.startswith("DeviceReduceSingleTileKernel<") for k in single_tile)


NAMESPACES_FILE = FILE.parent / "namespaces.cu"
# The same kernels as a file with host code (nvcc), launched through their namespaces.
NAMESPACES_HOST = """\
#include <cstdio>
namespace ops {
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
template <int N> __global__ void fill(float* x) { x[threadIdx.x] = N; }
namespace detail { __global__ void zero(float* x) { x[threadIdx.x] = 0; } }
}
namespace { __global__ void hidden(float* x) { x[0] = 1.0f; } }
int main() {
  ops::scale<<<1, 128>>>(nullptr, 2.0f);
  ops::fill<4><<<1, 64>>>(nullptr);
  ops::detail::zero<<<1, 32>>>(nullptr);
  hidden<<<1, 1>>>(nullptr);
  return 0;
}
"""


def _shown(result) -> list[tuple[str, str, str]]:
    return sorted((k.qualified_name, k.name, k.source_function) for k in result.kernels)


def test_namespaces_are_kept_where_kernels_are_shown_with_nvrtc():
    """Reports show `ops::fill<4>`; `name` (what a spec names, and what tells kernels apart)
    keeps its own rules: the namespace only where two kernels share the rest."""
    result = compile_source(NAMESPACES_FILE.read_text(), str(NAMESPACES_FILE), CompileOptions(arch="sm_90"))
    assert result.compiler == "nvrtc" and result.ok
    assert _shown(result) == [
        ("hidden", "hidden", "hidden"),  # an anonymous namespace is nothing a user writes
        ("ops::detail::spills", "spills", "spills"),
        ("ops::fill<4>", "fill<4>", "fill"),
        ("ops::scale", "ops::scale", "scale"),
        ("scale", "scale", "scale"),
    ]
    (spill,) = [d for d in result.diagnostics if d.code == "spill"]
    assert spill.message.startswith("kernel `ops::detail::spills` spills to local memory")


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
def test_namespaces_are_kept_with_nvcc_and_launches_still_found(tmp_path):
    path = tmp_path / "ns.cu"
    path.write_text(NAMESPACES_HOST)
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    assert result.compiler == "nvcc" and result.ok, result.diagnostics
    assert _shown(result) == [
        ("hidden", "hidden", "hidden"),
        ("ops::detail::zero", "zero", "zero"),
        ("ops::fill<4>", "fill<4>", "fill"),
        ("ops::scale", "scale", "scale"),
    ]


def test_the_text_and_json_reports_and_hover_show_the_namespace(capsys):
    from kernel_lsp.server.requests.hover import resources_markdown

    assert main(["check", "-v", "--arch", "sm_90", "--format", "json", str(NAMESPACES_FILE)]) == 0
    kernels = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    assert ("ops::fill<4>", "fill") in {(k["name"], k["function"]) for k in kernels}
    result = compile_source(NAMESPACES_FILE.read_text(), str(NAMESPACES_FILE), CompileOptions(arch="sm_90"))
    fill = [k for k in result.kernels if k.source_function == "fill"]
    assert resources_markdown("fill", fill, "nvrtc").startswith("**`ops::fill<4>`**")


@pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc backend unavailable")
def test_the_host_pass_of_nvccs_own_stubs_is_the_files_error():
    """`nvcc -c pointer_args.cu` fails: g++ rejects the launch stub nvcc generates for a kernel
    template whose argument is a __device__ variable's address. That is the file's error, at its
    top, naming the generated file, never a path in kernel-lsp's deleted temporary folder."""
    path = MANGLED / "pointer_args.cu"
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90", extended_lambda=True))
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert not result.ok and errors
    for d in errors:
        assert (d.path, d.line) == (str(path), 1) and "kernel-lsp-nvcc-" not in d.message
        assert d.message.startswith(
            "in the host code nvcc generates for this file (pointer_args.cudafe1.stub.c:"
        )
    assert len({d.message for d in errors}) == len(errors)  # nvcc prints each twice: once here
