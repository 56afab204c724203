"""The tuner tunes the block size where the launch takes it from a constant: a launcher's local
(`int threads = 256;`), a `constexpr`, a `#define` (also one a launch comment names), a `dim3
block(...)` literal, or a `<<<cdiv, 128>>>` literal the grid repeats. A candidate rewrites that
value in place; "nothing to tune" is said only when no such constant exists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions, find_toolchain
from kernel_lsp.host_launch.tunables import block_constants
from kernel_lsp.optimizer.proposers.tuner import TunerProposer, config_label, tune_space
from kernel_lsp.optimizer.session import RunRequest, run
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule
from kernel_lsp.optimizer.tunables import apply_config, current_config, launch_shapes
from kernel_lsp.spec import load_specs

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "host_launch"
POWERS = ("32", "64", "128", "256", "512", "1024")


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


@pytest.mark.parametrize(
    ("name", "kernels", "key", "values", "current", "before", "after"),
    [
        (
            "bench_launchers.cu",
            ["vector_add_kernel"],
            "threads@48",
            POWERS,
            "256",
            "int threads = 256;",
            "int threads = 64;",
        ),
        (
            "bench_launchers.cu",
            ["scale_kernel"],
            "threadsPerBlock@7",
            POWERS,
            "256",
            "constexpr int threadsPerBlock = 256;",
            "constexpr int threadsPerBlock = 64;",
        ),
        (
            "bench_launchers.cu",
            ["partial_sums_kernel", "final_sum_kernel"],
            "BLOCK_SIZE",
            POWERS,
            "256",
            "#define BLOCK_SIZE 256",
            "#define BLOCK_SIZE 64",
        ),
        # A square tile: TILE x TILE threads, so 8, 16 and 32 keep the block within 32..1024.
        (
            "bench_launchers.cu",
            ["matmul_kernel"],
            "TILE",
            ("8", "16", "32"),
            "16",
            "#define TILE 16",
            "#define TILE 64",
        ),
        (
            "llmc_style.cu",
            ["residual_forward_kernel"],
            "block_size@57",
            POWERS,
            "512",
            "const int block_size = 512;",
            "const int block_size = 64;",
        ),
        (
            "launch_ex.cu",
            ["norm_rows"],
            "kBlock@5",
            POWERS,
            "256",
            "constexpr int kBlock = 256;",
            "constexpr int kBlock = 64;",
        ),
        (
            "cooperative.cu",
            ["axpy"],
            "block@49",
            POWERS,
            "512",
            "const int block = 512;",
            "const int block = 64;",
        ),
        (
            "template_heavy.cu",
            ["fill<float>"],
            "launch.block@47",
            POWERS,
            "128",
            "fill<float><<<(n + 127) / 128, 128>>>(f, 1.0f, n);",
            "fill<float><<<(n + 63) / 64, 64>>>(f, 1.0f, n);",
        ),
    ],
)
def test_block_constants_of_host_launches(name, kernels, key, values, current, before, after):
    source = corpus(name)
    space = tune_space(source, kernels)
    assert space == {key: values}
    assert current_config(source, space) == {key: current}
    changed = apply_config(source, {key: "64"})
    assert after in changed and changed.count(before) == source.count(before) - 1
    assert config_label({key: "64"}).startswith(key.split("@")[0].replace("launch.block", "block") + "=")


def test_a_dim3_literal_in_the_launcher():
    source = """__global__ void k(float* x, int n) {}
extern "C" void run(float* x, int n) {
    dim3 block(128, 1, 1);
    dim3 grid((n + block.x - 1) / block.x);
    k<<<grid, block>>>(x, n);
}
"""
    (site,) = block_constants(source, ["k"])
    assert (site.key, site.choices) == ("block.x@3", tuple(int(v) for v in POWERS))
    assert "dim3 block(512, 1, 1);" in apply_config(source, {"block.x@3": "512"})


def test_constants_no_launch_of_the_kernel_uses_are_not_offered():
    source = corpus("bench_launchers.cu")
    assert tune_space(source, ["final_sum_kernel"]) == {}  # <<<1, 1024>>>: literals only, no grid to follow
    assert tune_space(corpus("matrix_samples.cu"), ["scaleRows"]) == {}  # from argv


def test_a_macro_a_launch_comment_names_is_tunable():
    source = "#define BLOCK 256\n// kernel-lsp: launch k grid=cdiv(n, BLOCK) block=BLOCK\n__global__ void k(float* x, int n) {}\n"
    assert tune_space(source, ["k"]) == {"BLOCK": POWERS}


def write_bench(tmp_path: Path) -> Path:
    cu = tmp_path / "bench.cu"
    shutil.copy(CORPUS / "bench_launchers.cu", cu)
    (tmp_path / "bench.spec.py").write_text(
        "from kernel_lsp.spec import In, Out, Scalar, Spec\n"
        'SPEC = Spec(kernel="vector_add_kernel", sizes=[{"n": 1000}, {"n": 5000}],\n'
        '            args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},\n'
        "            reference=lambda a, b: {'c': a + b})\n"
    )
    return cu


def test_candidates_that_cannot_launch_are_ruled_out_from_the_host_launch(tmp_path):
    cu = write_bench(tmp_path)
    spec = load_specs(str(tmp_path / "bench.spec.py")).specs[0]
    source = cu.read_text()
    tuner = TunerProposer(source, spec, ["vector_add_kernel"], "sm_90")
    assert [c["threads@48"] for c in tuner.space] == list(POWERS)
    shapes = launch_shapes(apply_config(source, {"threads@48": "128"}), ["vector_add_kernel"], {"n": 1000})
    assert shapes == {"vector_add_kernel": ((8, 1, 1), (128, 1, 1), 0)}


@pytest.mark.skipif(find_toolchain().problem is not None, reason="the launcher is host code: needs nvcc")
def test_the_tuner_finds_the_launchers_best_block(tmp_path):
    cu = write_bench(tmp_path)
    spec = load_specs(str(tmp_path / "bench.spec.py")).specs[0]
    # The content rules stand in for the GPU: 512 threads is the fastest block.
    rules = [Rule("int threads = 512;", 40e-6), Rule("int threads = 1024;", 60e-6)]
    evaluator = ContentEvaluator(str(cu), spec, CompileOptions(arch="sm_90"), rules=rules)
    req = RunRequest(path=str(cu), kernel="vector_add_kernel", proposer="tune", use_cache=False)
    result = run(req, evaluator=evaluator)
    assert result.accepted is not None and result.accepted.note == "threads=512"
    assert "int threads = 512;" in result.accepted.source
    assert result.accepted.source.replace("int threads = 512;", "int threads = 256;") == cu.read_text()
