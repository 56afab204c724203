"""Spec skeletons read from the kernel's body: shapes from multi-dimensional indexing, kinds from
reads and writes, float scalars with a value, CSR inputs that fit their sizes, a parameter named
like a Python keyword; and the corpus score (benchmarks/skeleton_score.py) stays where it is."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import numpy as np

from kernel_lsp.index_expr import parse_index, poly_text
from kernel_lsp.skeleton import skeleton_for
from kernel_lsp.spec import Alias, In, InOut, Out, Scalar, Scratch, load_specs, make_inputs
from kernel_lsp.spec.dry_run import dry_run

REPO = Path(__file__).resolve().parents[2]


def skeleton(tmp_path, source: str, *kernels: str):
    text = skeleton_for(source, list(kernels))
    path = tmp_path / "k.spec.py"
    path.write_text(text)
    loaded = load_specs(str(path))
    assert loaded.ok, (text, loaded.diagnostics)
    return text, loaded.specs[0]


def kinds_and_shapes(spec) -> dict[str, tuple[str, str]]:
    return {n: (type(a).__name__, getattr(a, "shape", None) or str(a.value)) for n, a in spec.args.items()}


def test_index_expressions_expand_into_strides():
    assert parse_index("(b * M + row) * K + k") == {("K", "M", "b"): 1, ("K", "row"): 1, ("k",): 1}
    assert poly_text(parse_index("2 * d + (n - 1) * 1")) == "2 * d + n - 1"
    assert parse_index("x[col_idx[j]]") == {("@x[col_idx[j]]",): 1}  # a load: an atom
    assert parse_index("(int)(8 * i) / 4") == {("i",): 2}  # a cast, an exact division
    assert parse_index("i % 4") == {("@i%4",): 1}
    assert parse_index("a < b") is None  # not an index


def test_three_d_buffers_through_a_local_index(tmp_path):
    source = textwrap.dedent(
        """\
        __global__ void k(const float* in, float* out, const float* A, float* C, int nx, int ny, int nz, int batch,
                          int M, int K) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            int z = blockIdx.z * blockDim.z + threadIdx.z;
            if (x >= nx || y >= ny || z >= nz) return;
            int i = (z * ny + y) * nx + x;
            out[i] = in[i] + in[i - nx * ny];
            int b = blockIdx.z;
            if (b < batch && y < M)
                for (int kk = 0; kk < K; kk++) C[(b * M + y) * K + kk] = A[b * M * K + y * K + kk];
        }
        """
    )
    _, spec = skeleton(tmp_path, source, "k")
    got = kinds_and_shapes(spec)
    assert got["in"] == ("In", "(nz, ny, nx)") and got["out"] == ("Out", "(nz, ny, nx)")
    assert got["A"] == ("In", "(batch, M, K)") and got["C"] == ("Out", "(batch, M, K)")
    assert all(got[s] == ("Scalar", "None") for s in ("nx", "ny", "nz", "batch", "M", "K"))
    # Three dimensions: small sizes (64 at most), not 256 or 1_000_003 of each.
    assert max(v for case in spec.sizes for v in case.values()) <= 64


def test_rows_through_local_pointers_and_divisions(tmp_path):
    # llm.c's idioms: a row pointer `inp + idx * C`, and `b = i / T`, `t = i % T` under i < B * T.
    source = textwrap.dedent(
        """\
        __global__ void ln(float* out, float* mean, const float* inp, const float* weight, int N, int C) {
            int idx = blockIdx.x * blockDim.x + threadIdx.x;
            if (idx < N) {
                const float* x = inp + idx * C;
                float m = 0.0f;
                for (int i = 0; i < C; i++) m += x[i];
                float* o = out + idx * C;
                for (int i = 0; i < C; i++) o[i] = (x[i] - m) * weight[i];
                mean[idx] = m;
            }
        }
        __global__ void ce(float* losses, const float* probs, const int* targets, int B, int T, int V) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < B * T) {
                int b = i / T;
                int t = i % T;
                const float* probs_bt = probs + b * T * V + t * V;
                losses[b * T + t] = -logf(probs_bt[targets[b * T + t]]);
            }
        }
        """
    )
    _, spec = skeleton(tmp_path, source, "ln")
    got = kinds_and_shapes(spec)
    assert got["out"] == ("Out", "(N, C)") and got["inp"] == ("In", "(N, C)")
    assert got["mean"] == ("Out", "N") and got["weight"] == ("In", "C")
    _, spec = skeleton(tmp_path, source, "ce")
    got = kinds_and_shapes(spec)
    assert got["losses"] == ("Out", "(B, T)") and got["probs"] == ("In", "(B, T, V)")
    assert got["targets"] == ("In", "(B, T)")


def test_a_flat_index_split_into_rows_is_two_dimensional(tmp_path):
    source = (
        "__global__ void scale_rows(float* out, const float* inp, const float* s, int N, int C) {\n"
        "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (idx < N * C) { int row = idx / C; out[idx] = inp[idx] * s[row]; }\n}\n"
    )
    _, spec = skeleton(tmp_path, source, "scale_rows")
    assert kinds_and_shapes(spec) == {
        "out": ("Out", "(N, C)"),
        "inp": ("In", "(N, C)"),
        "s": ("In", "N"),
        "N": ("Scalar", "None"),
        "C": ("Scalar", "None"),
    }


def test_kinds_from_reads_and_writes(tmp_path):
    source = textwrap.dedent(
        """\
        __device__ void rotate(float* v, int i) { float t = v[i]; v[i] = -t; }
        __global__ void k(float* y, const float* x, float* acc, float* hist, float* fresh, float* tmp_out,
                          float* rot, float* only_read, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i >= n) return;
            y[i] += x[i];                         // read-modify-write
            atomicAdd(&acc[0], x[i]);            // accumulated: starts from zeros
            atomicAdd(hist + (i % 4), 1.0f);
            fresh[i] = 2.0f * x[i];              // written first: what `+=` reads below is its own
            tmp_out[i] = x[i];                   // written, then read back: still an output
            fresh[i] += tmp_out[i];
            rotate(rot, i);                      // written by the helper it is passed to
            float v = only_read[i];              // not const, only read
            (void)v;
        }
        """
    )
    _text, spec = skeleton(tmp_path, source, "k")
    a = spec.args
    assert isinstance(a["y"], InOut) and a["y"].dist is None
    assert isinstance(a["acc"], InOut) and a["acc"].dist == "zeros" and a["acc"].shape == "1"
    assert isinstance(a["hist"], InOut) and a["hist"].dist == "zeros"
    assert isinstance(a["fresh"], Out)  # `fresh[i] += ...` reads what the kernel wrote: an output
    assert isinstance(a["tmp_out"], Out)
    assert isinstance(a["rot"], InOut)
    assert isinstance(a["only_read"], In) and isinstance(a["x"], In)


def test_float_scalars_get_values_and_in_is_not_a_problem(tmp_path):
    source = (
        "__global__ void leaky(const float* in, float* out, float negative_slope, float eps, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = in[i] > 0 ? in[i] : in[i] * negative_slope + eps;\n}\n"
    )
    text, spec = skeleton(tmp_path, source, "leaky")
    assert spec.args["negative_slope"] == Scalar("float32", 1.5) and spec.args["eps"] == Scalar(
        "float32", 1e-5
    )
    assert spec.size_names == ["n"] and spec.args["in"].shape == "n"  # no size invented for `in`
    assert "def reference(negative_slope, eps, n, **args):" in text and "args['in']" in text
    assert "TODO" not in text.split("SPEC = Spec(")[1]  # every argument read, nothing guessed
    # With the reference written, the skeleton is a spec that passes its dry run.
    done = text.replace(
        'raise NotImplementedError("write the numpy reference")',
        'x = args["in"]\n    return {"out": np.where(x > 0, x, x * negative_slope + eps)}',
    )
    (tmp_path / "k.spec.py").write_text(done)
    assert dry_run(load_specs(str(tmp_path / "k.spec.py")).specs[0]) == []


def test_csr_skeleton_draws_consistent_inputs(tmp_path):
    source = (REPO / "tests/fixtures/spec_corpus/bench/spmv_csr.cu").read_text()
    _text, spec = skeleton(tmp_path, source, "spmv_csr_kernel")
    got = kinds_and_shapes(spec)
    assert (
        got["row_ptr"] == ("In", "rows + 1")
        and got["col_idx"] == ("In", "nnz")
        and got["x"] == ("In", "cols")
    )
    for sizes in spec.verification_sizes():
        x = make_inputs(spec, sizes, seed=3)
        assert (
            x["row_ptr"][0] == 0 and x["row_ptr"][-1] == sizes["nnz"] and np.all(np.diff(x["row_ptr"]) >= 0)
        )
        assert x["col_idx"].size == 0 or x["col_idx"].max() < sizes["cols"]


def test_a_template_kernel_is_named_by_an_instance(tmp_path):
    source = textwrap.dedent(
        """\
        template <typename scalar_t>
        __global__ void act(scalar_t* out, const scalar_t* input, const int d) {
            const int token = blockIdx.x;
            for (int i = threadIdx.x; i < d; i += blockDim.x) out[token * d + i] = input[token * 2 * d + i];
        }
        template <int BLOCK>
        __global__ void blocked(float* out, const float* in, int n) {
            int i = blockIdx.x * BLOCK + threadIdx.x;
            if (i < n) out[i] = in[i];
        }
        void launch(float* o, const float* i, int n) { blocked<256><<<(n + 255) / 256, 256>>>(o, i, n); }
        """
    )
    text, spec = skeleton(tmp_path, source, "act")
    assert spec.kernel == "act<float>" and spec.args["out"].dtype == "float32"
    assert spec.args["input"].shape == "(num_tokens, 2 * d)" and "TODO(kernel-lsp): shape" in text
    _, spec = skeleton(tmp_path, source, "blocked")
    assert spec.kernel == "blocked<256>"


def test_a_pipeline_skeleton_shares_args(tmp_path):
    source = (REPO / "tests/fixtures/spec_corpus/llmc/rmsnorm.cu").read_text()
    text, spec = skeleton(tmp_path, source, "rms_kernel", "rmsnorm_apply_kernel")
    assert spec.pipeline == ["rms_kernel", "rmsnorm_apply_kernel"]
    assert set(spec.args) == {"rms", "inp", "N", "C", "out", "d_rms", "weight"}
    assert text.count("// kernel-lsp: launch") == 2


def _score_module():
    spec = importlib.util.spec_from_file_location("skeleton_score", REPO / "benchmarks" / "skeleton_score.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["skeleton_score"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_corpus_score_stays_at_least_where_it_is():
    score = _score_module()
    results = score.score(score.CORPUS, REPO)
    totals = score.totals(results)
    assert len(results) >= 20 and totals["args"] >= 150
    # 151 of 160 when this test was written (68, 42%, before the skeleton read kernel bodies and
    # launchers); 152 once an index the kernel leaves open is bounded by its launch's grid.
    assert totals["right"] >= 152, score.table(results, verbose=True)
    assert totals["right"] / totals["args"] >= 0.9


LAUNCHER = textwrap.dedent(
    """\
    #define NUM_BLOCKS 64
    __global__ void partial_sums(const float* x, float* partial, int* counter, int n) {
        __shared__ float s[256];
        float sum = 0.0f;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) sum += x[i];
        s[threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.x == 0) { partial[blockIdx.x] = s[0]; atomicAdd(counter, 1); }
    }
    __global__ void finish(const float* parts, float* out, float scale, int blocks) {
        float sum = 0.0f;
        for (int i = 0; i < blocks; i++) sum += parts[i];
        out[0] = sum * scale;
    }
    extern "C" void total(const float* x, float* out, int n) {
        float* partial;
        int* counter;
        cudaMalloc(&partial, NUM_BLOCKS * sizeof(float));
        cudaMalloc(&counter, sizeof(int));
        cudaMemset(counter, 0, sizeof(int));
        partial_sums<<<NUM_BLOCKS, 256>>>(x, partial, counter, n);
        finish<<<1, 1>>>(partial, out, 0.5f, NUM_BLOCKS);
        cudaFree(partial);
        cudaFree(counter);
    }
    """
)


def test_the_launcher_says_temporaries_values_and_shared_buffers(tmp_path):
    text, spec = skeleton(tmp_path, LAUNCHER, "partial_sums", "finish")
    a = spec.args
    # Allocated in the launcher and never copied: scratch, sized by the allocation; zeroed by memset.
    assert isinstance(a["partial"], Scratch) and a["partial"].shape == "64" and not a["partial"].zero
    assert isinstance(a["counter"], Scratch) and a["counter"].shape == "1" and a["counter"].zero
    # `parts` is the launcher's `partial` under another name; constants passed are values.
    assert a["parts"] == Alias("partial")
    assert a["blocks"] == Scalar("int32", 64) and a["scale"] == Scalar("float32", 0.5)
    assert a["n"] == Scalar("int32") and spec.size_names == ["n"]
    assert "Launched as the .cu launches it" in text


def test_a_mains_constants_stay_sizes_and_its_literals_are_values(tmp_path):
    source = (REPO / "tests/fixtures/spec_corpus/cuda_samples/saxpy.cu").read_text()
    _, spec = skeleton(tmp_path, source, "saxpy")
    assert spec.args["n"] == Scalar("int32") and spec.args["a"] == Scalar("float32", 2.0)
    assert isinstance(spec.args["y"], InOut)


def test_the_corpus_specs_verified_on_a_gpu_pass_on_the_cpu():
    """tests/gpu/test_spec_corpus_gpu.py verifies these; on the CPU their specs fit the kernels, the
    launches come from host code and the dry run passes."""
    from kernel_lsp.check import spec_findings

    for name in (
        "bench/sum_two_pass.cu",
        "bench/dot_bf16.cu",
        "bench/spmv_csr.cu",
        "bench/stencil3d.cu",
        "cuda_samples/histogram.cu",
        "cuda_samples/transpose.cu",
    ):
        cu = REPO / "tests/fixtures/spec_corpus" / name
        assert spec_findings(str(cu), cu.read_text()) == [], name
