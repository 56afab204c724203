"""A kernel spec without a launch comment runs as the file's host code launches it (expressions
over the kernel's parameters, which the spec's sizes name), and the skeleton writes that launch:
evaluated at the skeleton's sizes it is the launch the file itself runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_lsp.check import spec_findings
from kernel_lsp.evaluation.specs import launch_steps
from kernel_lsp.host_launch.spec_launch import with_host_launches
from kernel_lsp.model import CompileResult, KernelResources
from kernel_lsp.skeleton import spec_skeleton
from kernel_lsp.source import find_kernel, find_kernels, parse_directives
from kernel_lsp.spec import launch_dims, load_specs, source_constants, spec_path_for

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def artifact(path: str, *kernels: tuple[str, str]) -> CompileResult:
    return CompileResult(
        path, "sm_90", True, kernels=[KernelResources(n, m, "sm_90", 16, 0, 0, 0, 0) for n, m in kernels]
    )


BENCH_SPEC = """
from kernel_lsp.spec import In, Out, Scalar, Scratch, Spec
SPECS = [
    Spec(kernel="vector_add_kernel", sizes=[{"n": 1000}],
         args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
         reference=lambda a, b: {"c": a + b}),
    Spec(kernel="scale_kernel", name="scale", sizes=[{"n": 1000}],
         args={"y": Out("float32"), "alpha": Scalar("float32", 2.0), "n": Scalar("int32")},
         reference=lambda n, alpha: {"y": [0.0] * n}),
    Spec(kernel="sum", pipeline=["partial_sums_kernel", "final_sum_kernel"], sizes=[{"n": 1000, "count": 4}],
         args={"x": In("float32"), "partial": Scratch("float32", shape="count"), "out": Out("float32", shape=1),
               "n": Scalar("int32"), "count": Scalar("int32")},
         reference=lambda x: {"out": x.sum(keepdims=True)}),
]
"""


def test_a_spec_without_a_launch_comment_uses_the_host_launch(tmp_path):
    cu = tmp_path / "bench.cu"
    shutil.copy(CORPUS / "bench_launchers.cu", cu)
    Path(spec_path_for(str(cu))).write_text(BENCH_SPEC)
    source = cu.read_text()
    assert spec_findings(str(cu), source) == []
    loaded = load_specs(spec_path_for(str(cu)))
    compiled = artifact(
        str(cu),
        ("vector_add_kernel", "_Z17vector_add_kernelPKfS0_Pfi"),
        ("scale_kernel", "_Z12scale_kernelPffi"),
        ("partial_sums_kernel", "_Z19partial_sums_kernelPKfPfi"),
        ("final_sum_kernel", "_Z16final_sum_kernelPKfPfi"),
    )
    steps, problems = launch_steps(loaded.specs[0], source, compiled)
    assert problems == []
    assert [(s["grid"], s["block"], s["smem"]) for s in steps] == [("cdiv(n, 256)", "256", "0")]
    # `scale(float* y, float alpha, int length)` passes `length` as the kernel's `n`.
    steps, _ = launch_steps(loaded.specs[1], source, compiled)
    assert (steps[0]["grid"], steps[0]["block"]) == ("cdiv(n, 256)", "256")
    steps, _ = launch_steps(loaded.specs[2], source, compiled)
    assert [(s["kernel"], s["grid"], s["block"], s["smem"]) for s in steps] == [
        ("partial_sums_kernel", "cdiv(n, 256)", "256", "1024"),
        ("final_sum_kernel", "1", "1024", "0"),
    ]


def test_a_host_launch_the_spec_cannot_use_says_why_at_the_spec(tmp_path):
    cu = tmp_path / "samples.cu"
    shutil.copy(CORPUS / "matrix_samples.cu", cu)
    Path(spec_path_for(str(cu))).write_text(
        "from kernel_lsp.spec import Out, Scalar, Spec\n"
        'SPEC = Spec(kernel="scaleRows", sizes=[{"width": 8, "height": 8}],\n'
        '            args={"data": Out("float32", shape="(height, width)"), "width": Scalar("int32"),\n'
        '                  "height": Scalar("int32"), "factor": Scalar("float32", 2.0)},\n'
        "            reference=lambda height, width: {'data': [[0.0] * width] * height})\n"
    )
    (d,) = spec_findings(str(cu), cu.read_text())
    assert d.line == 2 and d.code == "spec-launch"
    assert d.message == (
        "no `// kernel-lsp: launch scaleRows grid=... block=...` line for `scaleRows` in the .cu (needed 1, "
        "found 0), and its launch in host code cannot be used: the launch at samples.cu:70 in `main`: grid "
        "`rowGrid` depends on a runtime value read from argv (line 66: `int rowThreads = argc > 1 ? "
        "atoi(argv[1]) : 32`)"
    )


def test_sizes_the_host_launch_needs_are_named_at_the_spec(tmp_path):
    cu = tmp_path / "bench.cu"
    shutil.copy(CORPUS / "bench_launchers.cu", cu)
    Path(spec_path_for(str(cu))).write_text(
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        'SPEC = Spec(kernel="vector_add_kernel", sizes=[{"length": 10}],\n'
        '            args={"a": In("float32", shape="length"), "b": In("float32", shape="length"),\n'
        '                  "c": Out("float32", shape="length"), "n": Scalar("int32", "length")},\n'
        "            reference=lambda a, b: {'c': a + b})\n"
    )
    (d,) = [d for d in spec_findings(str(cu), cu.read_text()) if d.code == "spec-launch"]
    assert d.message.startswith(
        "the launch at bench.cu:50 in `vector_add`: `cdiv(n, 256)`: name 'n' is not defined"
    )


# Each kernel's own launch, written from the C by hand: (sizes) -> (grid, block, smem).
OWN_LAUNCH = {
    ("bench_launchers.cu", "vector_add_kernel"): lambda s: ((cdiv(s["n"], 256), 1, 1), (256, 1, 1), 0),
    ("bench_launchers.cu", "matmul_kernel"): lambda s: (
        (cdiv(s["N"], 16), cdiv(s["M"], 16), 1),
        (16, 16, 1),
        0,
    ),
    ("bench_launchers.cu", "partial_sums_kernel"): lambda s: ((cdiv(s["n"], 256), 1, 1), (256, 1, 1), 1024),
    ("bench_launchers.cu", "final_sum_kernel"): lambda s: ((1, 1, 1), (1024, 1, 1), 0),
    ("bench_launchers.cu", "scale_kernel"): lambda s: ((cdiv(s["n"], 256), 1, 1), (256, 1, 1), 0),
    ("matrix_samples.cu", "vectorAdd"): lambda s: ((cdiv(s["numElements"], 256), 1, 1), (256, 1, 1), 0),
    ("llmc_style.cu", "residual_forward_kernel"): lambda s: ((cdiv(s["N"], 512), 1, 1), (512, 1, 1), 0),
    ("llmc_style.cu", "layernorm_stats_kernel"): lambda s: ((cdiv(s["N"], 64), 1, 1), (64, 1, 1), 0),
    ("cooperative.cu", "axpy"): lambda s: ((cdiv(s["n"], 512), 1, 1), (512, 1, 1), 0),
    ("launch_ex.cu", "norm_rows"): lambda s: ((s["rows"], 1, 1), (256, 1, 1), 2048),
    ("launch_ex.cu", "clustered"): lambda s: ((cdiv(s["n"], 128), 1, 1), (128, 1, 1), 0),
    ("template_heavy.cu", "block_reduce"): lambda s: ((cdiv(s["n"], 128), 1, 1), (128, 1, 1), 0),
    ("template_heavy.cu", "fill"): lambda s: ((cdiv(s["n"], 128), 1, 1), (128, 1, 1), 0),
}


@pytest.mark.parametrize(("name", "kernel"), sorted(OWN_LAUNCH))
def test_the_skeletons_launch_is_the_files_own(tmp_path, name, kernel):
    cu = tmp_path / name
    shutil.copy(CORPUS / name, cu)
    source = cu.read_text()
    signature = find_kernel(find_kernels(source), kernel)
    text = spec_skeleton(signature, parse_directives(source), source)
    assert (
        "# Launched as the .cu launches it: the launch at line" in text and "needs a launch line" not in text
    )
    spec_file = Path(spec_path_for(str(cu)))
    spec_file.write_text(text)
    loaded = load_specs(str(spec_file))
    assert loaded.ok, loaded.diagnostics
    (spec,) = loaded.specs
    assert [d.message for d in spec_findings(str(cu), source) if d.code == "spec-launch"] == []
    # The skeleton names a template kernel by the instance the file launches (`fill<float>`).
    (d,) = with_host_launches(parse_directives(source), source, spec.kernels).launches_of(spec.kernel)[:1]
    assert f"grid={d.grid} block={d.block}" in text
    constants = source_constants(source)
    for sizes in spec.verification_sizes():
        assert launch_dims(d.grid, d.block, d.smem, {**constants, **sizes}) == OWN_LAUNCH[(name, kernel)](
            sizes
        )


def test_a_skeleton_whose_host_launch_cannot_be_used_says_why():
    source = (CORPUS / "matrix_samples.cu").read_text()
    signature = find_kernel(find_kernels(source), "scaleRows")
    text = spec_skeleton(signature, parse_directives(source), source)
    assert (
        "# Its launch in host code cannot be used (the launch at line 70 in `main`: grid `rowGrid` depends on a "
        "runtime value read from argv" in text
    )
    assert "needs a launch line, e.g.:\n#   // kernel-lsp: launch scaleRows" in text
