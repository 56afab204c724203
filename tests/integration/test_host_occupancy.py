"""Theoretical occupancy for kernels whose block size comes from a launch in host code or from
`__launch_bounds__`: `--check` shows it with where the block came from, several launches show
each, a launch it cannot resolve says why, and the launch comment stays an override."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kernel_lsp.archs import occupancy
from kernel_lsp.cli import main
from kernel_lsp.compile import find_toolchain
from kernel_lsp.host_launch.occupancy import launch_occupancies, occupancy_summary
from kernel_lsp.model import KernelResources
from kernel_lsp.source import parse_directives

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="needs nvcc (host code)")
OCC = r"occupancy \d+% at {} threads/block \(\d+/64 warps, limited by [^)]*\)"


def check_text(path: Path, capsys, *extra: str) -> str:
    code = main(["check", "-v", str(path), "--arch", "sm_90", "--no-gpu", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def kernel_line(out: str, kernel: str) -> str:
    return next(line for line in out.splitlines() if f"kernel {kernel} [sm_90]" in line)


@needs_nvcc
def test_check_shows_occupancy_for_a_cuda_samples_file(tmp_path, capsys):
    path = tmp_path / "matrix_samples.cu"
    shutil.copy(CORPUS / path.name, path)
    out = check_text(path, capsys)
    line = kernel_line(out, "vectorAdd")
    assert re.search(
        OCC.format(256) + r" — block 256 from the launch at matrix_samples\.cu:63 in `main`$", line
    )
    line = kernel_line(out, "MatrixMulCUDA<16>")
    assert re.search(
        OCC.format(256) + r" — block 256 from the launch at matrix_samples\.cu:56 in `main`$", line
    )
    line = kernel_line(out, "scaleRows")
    assert line.endswith(
        "occupancy: unknown, the launch at matrix_samples.cu:70 in `main`: block size `rowBlock` depends on a "
        "runtime value read from argv (line 66: `int rowThreads = argc > 1 ? atoi(argv[1]) : 32`)"
    )


@needs_nvcc
def test_check_shows_occupancy_for_a_template_heavy_file(tmp_path, capsys):
    path = tmp_path / "template_heavy.cu"
    shutil.copy(CORPUS / path.name, path)
    out = check_text(path, capsys)
    for block, line in ((128, 40), (512, 41), (256, 42)):
        text = kernel_line(out, f"block_reduce<float, {block}>")
        assert re.search(
            OCC.format(block)
            + rf" — block {block} from the launch at template_heavy\.cu:{line} in `reduce` \(through macro `LAUNCH_REDUCE`\)$",
            text,
        ), text
    # One instance launched at two block sizes: each is shown.
    text = kernel_line(out, "fill<float>")
    assert re.search(
        OCC.format(128)
        + r" — block 128 from the launch at template_heavy\.cu:47 in `fills`; also "
        + OCC.format(512)[len("occupancy ") :]
        + r" — block 512 from the launch at template_heavy\.cu:49 in `fills`$",
        text,
    ), text
    assert re.search(OCC.format(1024) + " — block 1024 from", kernel_line(out, "fill<double>"))
    assert re.search(
        OCC.format(256) + r" — bounded by __launch_bounds__\(256, 4\)$", kernel_line(out, "bounded_only")
    )
    assert "depends on an environment variable" in kernel_line(out, "env_sized")
    doc = json.loads(
        (
            main(["--check", str(path), "--arch", "sm_90", "--no-gpu", "--format", "json"]),
            capsys.readouterr().out,
        )[1]
    )
    kernels = {k["name"]: k for f in doc["files"] for k in f["kernels"]}
    fill = kernels["fill<float>"]
    assert [(c["origin"], c["blockSize"]) for c in fill["launches"]] == [("host", 128), ("host", 512)]
    assert fill["blockSize"] == 128 and fill["occupancy"]["fraction"] == fill["launches"][0]["occupancy"]


@needs_nvcc
def test_the_launch_comment_stays_an_override(tmp_path, capsys):
    text = (CORPUS / "bench_launchers.cu").read_text()
    path = tmp_path / "bench.cu"
    path.write_text("// kernel-lsp: launch vector_add_kernel grid=cdiv(n, 128) block=128\n" + text)
    out = check_text(path, capsys)
    assert re.search(
        OCC.format(128) + r" — block 128 from the launch comment at line 1$",
        kernel_line(out, "vector_add_kernel"),
    )
    # Others still come from host code (one line lower now).
    assert "block 256 from the launch at bench.cu:58 in `matmul`" in kernel_line(out, "matmul_kernel")


SOURCE = """
__global__ void __launch_bounds__(512) k(float* x, int n) {}
__global__ void plain(float* x, int n) {}
void run(float* x, int n, int threads, int big) {
    k<<<(n + 255) / 256, 256, 64 * big>>>(x, n);
    k<<<(n + 255) / 256, 256, 64 * big>>>(x, n);
    plain<<<n, threads>>>(x, n);
}
"""


def configs(function: str, registers: int = 32, source: str = SOURCE):
    return launch_occupancies(
        source, "f.cu", function, function, (), "sm_90", registers, 0, parse_directives(source), None, None
    )


def test_host_launches_before_launch_bounds_and_notes_for_what_is_left_out():
    (entry,) = configs("k")  # two equal launches are one configuration
    assert (entry.origin, entry.block_size) == ("host", 256)
    assert entry.occupancy == occupancy("sm_90", 256, 32, 0)
    assert entry.note == "dynamic shared memory not counted: `64 * big` depends on the launcher's parameters"
    (entry,) = configs("plain")
    assert entry.block_size is None
    assert entry.note == "block size `threads` depends on the parameter `threads` of `run`"
    k = KernelResources("plain", "_Z5plainPfi", "sm_90", 32, 0, 0, 0, 0, launches=configs("plain"))
    assert occupancy_summary(k) == (
        "occupancy: unknown, the launch at f.cu:7 in `run`: block size `threads` depends on the parameter "
        "`threads` of `run`"
    )


def test_launch_bounds_alone_and_for_a_template_instance():
    source = (
        "template <int B> __global__ void __launch_bounds__(B * 2) t(float* x) {}\n"
        + SOURCE.split("void run")[0]
    )
    (entry,) = configs("k", source=source)
    assert (entry.origin, entry.where, entry.block_size) == ("bounds", "__launch_bounds__(512)", 512)
    assert entry.describe().endswith("— bounded by __launch_bounds__(512)")
    (entry,) = launch_occupancies(
        source, "f.cu", "t", "t<128>", ("128",), "sm_90", 32, 0, parse_directives(source), None, None
    )
    assert (entry.where, entry.block_size) == ("__launch_bounds__(B * 2) = 256", 256)
    assert configs("plain", source=source) == ()
    k = KernelResources("plain", "_Z5plainPfi", "sm_90", 32, 0, 0, 0, 0)
    assert (
        "no launch comment, launch in host code or __launch_bounds__ gives a block size"
        in occupancy_summary(k)
    )


@needs_nvcc
def test_a_headers_kernel_takes_its_block_from_the_file_that_launches_it(tmp_path, capsys):
    """A kernel defined in a header and launched from a `.cu` that includes it: the header's
    figures use that launch's block (issue 45: "occupancy: none"), found among the includers even
    when the nearest one does not launch it; a launch comment in the launching file counts too."""
    (tmp_path / "k.cuh").write_text(
        "#pragma once\n"
        "__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }\n"
        "__global__ void shift(float* x) { x[threadIdx.x] += 1; }\n"
    )
    (tmp_path / "a_near.cu").write_text('#include "k.cuh"\n__global__ void other(float* x) { x[0] = 0; }\n')
    (tmp_path / "main.cu").write_text(
        '#include "k.cuh"\n'
        "// kernel-lsp: launch shift grid=1 block=64\n"
        "void run(float* x, int n) { scale<<<(n + 127) / 128, 128>>>(x, n); }\n"
    )
    out = check_text(tmp_path, capsys)
    header = [line for line in out.splitlines() if line.startswith("k.cuh:") or "/k.cuh:" in line]
    scale = next(line for line in header if "kernel scale [sm_90]" in line)
    assert re.search(OCC.format(128), scale) and "from the launch at main.cu:3 in `run`" in scale, scale
    shift = next(line for line in header if "kernel shift [sm_90]" in line)
    assert re.search(OCC.format(64), shift) and "the launch comment at main.cu:2" in shift, shift
