"""Spec skeletons (shapes read from the kernel's indexing, small sizes) and `kernel-lsp spec`;
`kernel-lsp optimize` on a one-kernel file without --kernel."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from kernel_lsp.cli import main
from kernel_lsp.skeleton import spec_skeleton
from kernel_lsp.source import find_kernels, parse_directives
from kernel_lsp.spec import check_spec, eval_shape, load_specs, source_constants

MATMUL = textwrap.dedent(
    """\
    // C = A B, row-major
    __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
      int row = blockIdx.y * blockDim.y + threadIdx.y;
      int col = blockIdx.x * blockDim.x + threadIdx.x;
      if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
      }
    }
    """
)
OPAQUE = (
    "__global__ void gather(const float* x, const int* idx, float* y, int n, int m) { y[idx[0]] = x[m]; }\n"
)
VADD = (
    "__global__ void vadd(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n"
)


def skeleton_for(source: str, tmp_path, name: str = "k.spec.py"):
    sig = find_kernels(source)[0]
    text = spec_skeleton(sig, parse_directives(source), source)
    (tmp_path / name).write_text(text)
    loaded = load_specs(str(tmp_path / name))
    assert loaded.ok, (text, loaded.diagnostics)
    return text, loaded.specs[0], sig


def most_elements(spec) -> int:
    return max(
        math.prod(eval_shape(arg.shape, sizes))
        for sizes in spec.sizes
        for arg in spec.args.values()
        if getattr(arg, "shape", None) is not None
    )


def test_matmul_skeleton_reads_2d_shapes_and_stays_small(tmp_path):
    text, spec, sig = skeleton_for(MATMUL, tmp_path)
    assert spec.args["A"].shape == "(M, K)"
    assert spec.args["B"].shape == "(K, N)"
    assert spec.args["C"].shape == "(M, N)"
    assert most_elements(spec) <= 256 * 256  # was (m, n, k) at 1_000_003 each: ~1e18 elements
    assert "grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16)" in text  # the launch line it suggests
    launched = MATMUL + "// kernel-lsp: launch matmul grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16)\n"
    assert check_spec(spec, sig, parse_directives(launched), source_constants(launched)) == []


def test_shapes_it_cannot_read_are_marked_and_small(tmp_path):
    text, spec, _ = skeleton_for(OPAQUE, tmp_path)
    # x[m] reaches element m, idx[0] element 0; y's extent (indexed by idx's values) is a guess.
    assert spec.args["x"].shape == "m + 1" and spec.args["idx"].shape == "1"
    assert text.count("TODO(kernel-lsp): shape") == 1 and '"y": Out("float32", shape="y_rows")' in text
    assert most_elements(spec) <= 256 * 256


def test_a_square_buffer_at_one_size_gets_small_sizes(tmp_path):
    square = (
        "__global__ void transpose(const float* in, float* out, int n) {\n"
        "  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (row < n && col < n) out[col * n + row] = in[row * n + col];\n}\n"
    )
    _, spec, _ = skeleton_for(square, tmp_path)
    assert spec.args["in"].shape == "(n, n)" and spec.args["out"].shape == "(n, n)"
    assert most_elements(spec) <= 256 * 256  # not 1_000_003² elements


def test_one_dimensional_skeleton_is_unchanged(tmp_path):
    _, spec, _ = skeleton_for(VADD, tmp_path)
    assert [a.shape for a in (spec.args["a"], spec.args["b"], spec.args["c"])] == ["n", "n", "n"]
    assert [s["n"] for s in spec.sizes] == [1, 1000, 1_000_003]


def test_spec_command_writes_beside_the_file_and_never_overwrites(capsys, tmp_path):
    cu = tmp_path / "mm.cu"
    cu.write_text(MATMUL)
    assert main(["spec", str(cu)]) == 0  # the file's only kernel: no --kernel needed
    written = (tmp_path / "mm.spec.py").read_text()
    assert 'kernel="matmul"' in written and "mm.spec.py" in capsys.readouterr().out
    (tmp_path / "mm.spec.py").write_text("# mine\n")
    assert main(["spec", str(cu), "--kernel", "matmul"]) == 2
    assert "exists; not overwritten (use --force)" in capsys.readouterr().err
    assert (tmp_path / "mm.spec.py").read_text() == "# mine\n"
    assert main(["spec", str(cu), "--kernel", "matmul", "--force"]) == 0
    assert (tmp_path / "mm.spec.py").read_text() == written
    capsys.readouterr()


def test_spec_command_needs_a_kernel_when_there_are_several(capsys, tmp_path):
    cu = tmp_path / "two.cu"
    cu.write_text(MATMUL + VADD)
    assert main(["spec", str(cu)]) == 2
    assert "2 kernels (matmul, vadd); name one with --kernel" in capsys.readouterr().err
    assert main(["spec", str(cu), "--kernel", "nope"]) == 2
    assert "no kernel `nope`" in capsys.readouterr().err
    assert not (tmp_path / "two.spec.py").exists()
    assert main(["spec", str(cu), "-k", "vadd"]) == 0
    assert 'kernel="vadd"' in (tmp_path / "two.spec.py").read_text()
    capsys.readouterr()


def test_optimize_takes_the_only_kernel_without_kernel_flag(capsys, tmp_path):
    one = tmp_path / "mm.cu"
    one.write_text(MATMUL)
    # It gets past the kernel choice and stops at the missing spec, which it says how to write.
    assert main(["optimize", str(one)]) == 2
    err = capsys.readouterr().err
    assert "`matmul` has no spec" in err and "kernel-lsp spec mm.cu --kernel matmul" in err
    two = tmp_path / "two.cu"
    two.write_text(MATMUL + VADD)
    assert main(["optimize", str(two)]) == 2
    assert "name one with --kernel" in capsys.readouterr().err


def test_spec_command_writes_a_pipeline(capsys, tmp_path):
    cu = tmp_path / "two.cu"
    cu.write_text(MATMUL + VADD)
    assert main(["spec", str(cu)]) == 2
    assert "with --pipeline a,b" in capsys.readouterr().err
    assert main(["spec", str(cu), "--pipeline", "matmul,nope"]) == 2
    assert "no kernel nope (found: matmul, vadd)" in capsys.readouterr().err
    assert main(["spec", str(cu), "--pipeline", "matmul,vadd"]) == 0
    assert "pipeline matmul -> vadd" in capsys.readouterr().out
    spec = load_specs(str(tmp_path / "two.spec.py")).specs[0]
    assert spec.pipeline == ["matmul", "vadd"] and {"A", "B", "C", "a", "b", "c"} <= set(spec.args)


def test_a_file_whose_launcher_runs_its_kernels_gets_an_entry_spec_or_the_pipeline(capsys, tmp_path):
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "spec_corpus" / "llmc"
    cu = tmp_path / "rmsnorm.cu"
    cu.write_text(
        (corpus / "rmsnorm.cu")
        .read_text()
        .replace('#include "common.h"', "#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))")
    )
    assert main(["spec", str(cu)]) == 0  # no flags: the launcher, which a program calls
    assert "entry rmsnorm_forward" in capsys.readouterr().out
    spec = load_specs(str(tmp_path / "rmsnorm.spec.py")).specs[0]
    assert spec.entry == "rmsnorm_forward" and spec.size_names == ["B", "T", "C"]
    assert spec.args["rms"].shape == "B * T" and spec.args["out"].shape == "(B * T, C)"
    # --pipeline: the launcher's two kernels, in order, as one kernel spec.
    assert main(["spec", str(cu), "--pipeline", "rms_kernel,rmsnorm_apply_kernel", "--force"]) == 0
    assert "pipeline rms_kernel -> rmsnorm_apply_kernel" in capsys.readouterr().out
    spec = load_specs(str(tmp_path / "rmsnorm.spec.py")).specs[0]
    assert spec.pipeline == ["rms_kernel", "rmsnorm_apply_kernel"] and spec.aliases() == {"d_rms": "rms"}
    # Two launchers: which one the program calls is the user's to say, and the hint says how.
    other = tmp_path / "two.cu"
    other.write_text(
        cu.read_text() + "\n__global__ void extra(float* y, int n) { y[0] = n; }\n"
        "void run_extra(float* y, int n) { extra<<<1, 1>>>(y, n); rms_kernel<<<1, 1>>>(y, y, n, n); }\n"
    )
    assert main(["spec", str(other)]) == 2
    err = capsys.readouterr().err
    assert "2 launchers (rmsnorm_forward, run_extra)" in err and "--entry" in err
    assert "`rmsnorm_forward` launches rms_kernel -> rmsnorm_apply_kernel" in err
    assert "--pipeline rms_kernel,rmsnorm_apply_kernel" in err
    assert main(["spec", str(other), "--entry", "run_extra"]) == 0
    assert load_specs(str(tmp_path / "two.spec.py")).specs[0].entry == "run_extra"
    capsys.readouterr()


def test_kernel_naming_a_launcher_suggests_entry(capsys, tmp_path):
    entries = Path(__file__).resolve().parents[2] / "samples" / "entries"
    cu = tmp_path / "vadd.cu"
    cu.write_text((entries / "vector_add_bf16.cu").read_text())
    assert main(["spec", str(cu), "--kernel", "vector_add_bf16"]) == 2
    err = capsys.readouterr().err
    assert "no kernel `vector_add_bf16` (found: vector_add_bf16_kernel)" in err
    assert "--entry vector_add_bf16" in err
    assert main(["spec", str(cu), "--entry", "nope"]) == 2
    assert "no host function `nope`" in capsys.readouterr().err and not (tmp_path / "vadd.spec.py").exists()
    assert main(["spec", str(cu), "--kernel", "vector_add_bf16_kernel"]) == 0
    assert 'kernel="vector_add_bf16_kernel"' in (tmp_path / "vadd.spec.py").read_text()
    capsys.readouterr()
