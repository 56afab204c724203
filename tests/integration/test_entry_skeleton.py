"""`kernel-lsp spec` on launchers: an entry skeleton (`Spec(entry=...)`) whose args are the
launcher's parameters, read from what the launcher and its kernels do with them. Checked on the
launcher files of tests/fixtures/launchers (each with the hand-written spec it should match) and
the entry samples; and the kernel skeleton's old bad guesses (a 3-D stencil's `(1, ny, nx)`, an
output marked InOut, one value for both bounds of an integral, a block-indexed output named
`num_blocks`) stay fixed."""

from __future__ import annotations

import importlib.util
import random
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.entry_skeleton import entry_skeleton, launcher_entries, plan_entry
from kernel_lsp.host_entry import entry_abi, find_host_function
from kernel_lsp.skeleton import skeleton_for
from kernel_lsp.spec import In, Out, Scalar, check_entry_spec, load_specs

REPO = Path(__file__).resolve().parents[2]
LAUNCHERS = REPO / "tests" / "fixtures" / "launchers"
FILES = sorted(p.stem for p in LAUNCHERS.glob("*.cu"))


def _score_module():
    spec = importlib.util.spec_from_file_location("skeleton_score", REPO / "benchmarks" / "skeleton_score.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["skeleton_score"] = module
    spec.loader.exec_module(module)
    return module


def test_there_are_eight_launcher_files_in_both_styles():
    assert len(FILES) == 8
    texts = [(LAUNCHERS / f"{f}.cu").read_text() for f in FILES]
    assert sum("cudaMemcpyHostToDevice" in t for t in texts) >= 3  # host pointers copied in and out
    assert sum("cudaMemcpy" not in t for t in texts) >= 4  # device pointers
    assert sum("bfloat16" in t for t in texts) >= 3 and sum("bfloat16" not in t for t in texts) >= 3


@pytest.mark.parametrize("name", FILES)
def test_the_cli_writes_an_entry_skeleton_with_the_expected_arguments(name, tmp_path, capsys):
    cu = tmp_path / f"{name}.cu"
    shutil.copy(LAUNCHERS / f"{name}.cu", cu)
    assert main(["spec", str(cu)]) == 0
    truth = load_specs(str(LAUNCHERS / f"{name}.spec.py")).specs[0]
    assert f"entry {truth.entry}" in capsys.readouterr().out
    loaded = load_specs(str(tmp_path / f"{name}.spec.py"))
    assert loaded.ok, loaded.diagnostics
    guess = loaded.specs[0]
    assert guess.entry == truth.entry and list(guess.args) == list(truth.args)
    score = _score_module()
    wrong = [
        f"{a.name}: {'; '.join(a.why)}"
        for a in score.score_file(truth, [guess], random.Random(0))
        if not a.right
    ]
    assert wrong == []
    # It fits the launcher as `check` sees it (every parameter, C types, scalars), and every case
    # it starts with is one the launcher accepts, as the truth says.
    function = find_host_function(cu.read_text(), truth.entry)
    assert check_entry_spec(guess, function, entry_abi(function)) == []
    for case in guess.sizes:
        assert truth.valid(case) and guess.valid(case), case


@pytest.mark.parametrize(
    "name, accepted, refused",
    [
        ("softmax_fp32", {"rows": 3, "cols": 16384}, {"rows": 3, "cols": 16385}),
        ("layernorm_bf16", {"rows": 3, "cols": 42}, {"rows": 3, "cols": 41}),
        ("prefix_sum_fp32", {"n": 1 << 20}, {"n": (1 << 20) + 1}),
    ],
)
def test_the_launchers_guards_become_sizes_valid(name, accepted, refused, tmp_path):
    source = (LAUNCHERS / f"{name}.cu").read_text()
    (tmp_path / "k.spec.py").write_text(entry_skeleton(source, launcher_entries(source)[0]))
    spec = load_specs(str(tmp_path / "k.spec.py")).specs[0]
    assert spec.valid(accepted) and not spec.valid(refused)
    # The edge sizes it refuses are left out, not failed (`cols` = 97 for layernorm_bf16).
    assert all(spec.valid(case) for case in spec.verification_sizes())


def test_every_launcher_file_scores_right_with_no_edit():
    score = _score_module()
    results = score.score(LAUNCHERS, REPO)
    totals = score.totals(results)
    # 36 of 36 when written (6 before entry skeletons: the kernel's skeleton, by name).
    assert totals["args"] == 36 and totals["right"] == 36, score.table(results, verbose=True)
    results = score.score(score.ENTRIES, REPO)  # written before entry skeletons existed
    assert score.totals(results)["right"] == score.totals(results)["args"], score.table(results, verbose=True)
    # Written after the skeleton: 22 of 23 at first (a guard `k > n` not seen, since fixed), 8 before.
    results = score.score(score.HELDOUT, REPO)
    assert score.totals(results)["right"] >= 22, score.table(results, verbose=True)


SOURCE = textwrap.dedent(
    """\
    __global__ void scale_kernel(const float* src, float* dst, float factor, int count) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < count) dst[i] = factor * src[i];
    }
    __global__ void add_kernel(float* dst, const float* other, int count) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < count) dst[i] += other[i];
    }
    __global__ void bump(float* acc, int count) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < count) atomicAdd(&acc[0], 1.0f);
    }
    static void helper(float* y, const float* x, int n) { add_kernel<<<(n + 255) / 256, 256>>>(y, x, n); }
    extern "C" int run(const float* x, float* y, float* z, float* total, float alpha, float beta, int rows, int cols,
                       int mode, cudaStream_t stream) {
        if (rows <= 0 || cols <= 0) return 0;
        if (!x) return 1;
        const int n = rows * cols;
        scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, alpha, n);
        add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(z, x, n);
        cudaMemset(total, 0, sizeof(float));
        bump<<<(n + 255) / 256, 256, 0, stream>>>(total, n);
        return 0;
    }
    """
)


def test_kinds_from_the_launch_order_and_the_launchers_own_steps():
    plan = plan_entry(SOURCE, "run")
    a = plan.args
    assert set(a) == {"x", "y", "z", "total", "alpha", "beta", "rows", "cols", "mode"}  # no stream
    assert a["x"].kind == "In" and a["x"].shape == "rows * cols"
    assert a["y"].kind == "Out"  # written by the first kernel that touches it
    assert a["z"].kind == "InOut"  # `+=`: read before written
    assert a["total"].kind == "Out" and a["total"].dist == ""  # zeroed by the launcher first
    assert a["alpha"].value != a["beta"].value  # two floats, two values
    assert (a["rows"].value, a["cols"].value) == ("", "")  # sizes
    assert a["mode"].value and a["mode"].notes  # an integer nothing sizes: a value, marked
    assert plan.valid == []  # `rows <= 0` refuses no positive size, `!x` names a pointer
    assert launcher_entries(SOURCE) == ["run", "helper"]  # an unused helper may be an entry too


def test_a_helper_another_launcher_calls_is_not_an_entry():
    source = SOURCE.replace("    return 0;\n}", "    helper(z, x, n);\n    return 0;\n}")
    assert "helper(z" in source
    assert launcher_entries(source) == ["run"]
    assert launcher_entries(source + "void other(float* y, int n) { helper(y, y, n); }\n") == ["run", "other"]


def test_kernel_skeletons_old_bad_guesses(tmp_path):
    source = textwrap.dedent(
        """\
        __global__ void heat(const float* in, float* out, int nx, int ny, int nz, float alpha) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int j = blockIdx.y * blockDim.y + threadIdx.y;
            int k = blockIdx.z * blockDim.z + threadIdx.z;
            if (i >= 1 && i < nx - 1 && j >= 1 && j < ny - 1 && k >= 1 && k < nz - 1) {
                int idx = i + j * nx + k * nx * ny;
                out[idx] = in[idx] + alpha * (in[idx - 1] + in[idx + 1] + in[idx - nx * ny] - 3.0f * in[idx]);
            }
        }
        __global__ void integrate(float* out, float a, float b, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { float h = (b - a) / n; out[i] = h * (a + i * h); }
        }
        __global__ void normalize(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { y[i] = x[i] * x[i]; y[i] *= 0.5f; }
        }
        __global__ void block_sums(const float* x, float* sums, int n) {
            __shared__ float s[256];
            int i = blockIdx.x * 256 + threadIdx.x;
            s[threadIdx.x] = i < n ? x[i] : 0.0f;
            __syncthreads();
            if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
        }
        extern "C" void launch_sums(const float* x, float* sums, int n) {
            block_sums<<<(n + 255) / 256, 256>>>(x, sums, n);
        }
        """
    )

    def args(kernel):
        path = tmp_path / "k.spec.py"
        path.write_text(skeleton_for(source, [kernel]))
        return load_specs(str(path)).specs[0].args

    heat = args("heat")
    assert heat["in"] == In("float32", shape="(nz, ny, nx)") and heat["out"].shape == "(nz, ny, nx)"
    integral = args("integrate")
    assert integral["a"] != integral["b"] and isinstance(integral["a"], Scalar)
    assert isinstance(args("normalize")["y"], Out)  # written, then scaled in place: still an output
    sums = args("block_sums")
    assert sums["sums"] == Out("float32", shape="cdiv(n, 256)") and sums["x"].shape == "n"


def test_the_launcher_files_compile_and_their_specs_fit_and_dry_run(capsys):
    assert main(["check", "--no-gpu", "--specs", "run", str(LAUNCHERS)]) == 0, capsys.readouterr()
    capsys.readouterr()


def test_the_held_out_launcher_files_compile_and_their_specs_fit(capsys):
    assert (
        main(["check", "--no-gpu", "--specs", "run", str(REPO / "tests" / "fixtures" / "launchers_heldout")])
        == 0
    )
    capsys.readouterr()


def test_a_guard_between_two_sizes_is_seen():
    source = (REPO / "tests" / "fixtures" / "launchers_heldout" / "conv1d_fp32.cu").read_text()
    plan = plan_entry(source, "conv1d")
    assert plan.valid == ["k <= n"]


GATHER = textwrap.dedent(
    """\
    __global__ void gather(const float* table, const int* idx, float* out, int n, int d) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) for (int k = 0; k < d; k++) out[i * d + k] = table[idx[i] * d + k];
    }
    extern "C" void embed(const float* table, const int* idx, float* out, int n, int d, int vocab) {
        gather<<<(n + 255) / 256, 256>>>(table, idx, out, n, d);
    }
    """
)


def test_an_open_size_is_the_launchers_one_unused_parameter_and_distributions_carry_over(tmp_path):
    """Not `table_rows` (a name the skeleton made up): `vocab`, the parameter nothing else reads;
    the indices drawn below it; CSR offsets and columns that fit the launcher's sizes."""
    from kernel_lsp.spec import make_inputs

    (tmp_path / "k.spec.py").write_text(entry_skeleton(GATHER, "embed"))
    spec = load_specs(str(tmp_path / "k.spec.py")).specs[0]
    assert spec.args["table"].shape == "(vocab, d)" and spec.size_names == ["n", "d", "vocab"]
    for sizes in spec.verification_sizes():
        x = make_inputs(spec, sizes, seed=1)
        assert x["idx"].size == 0 or x["idx"].max() < sizes["vocab"]
    source = (REPO / "tests" / "fixtures" / "spec_corpus" / "bench" / "spmv_csr.cu").read_text()
    (tmp_path / "k.spec.py").write_text(entry_skeleton(source, "spmv_csr"))
    spec = load_specs(str(tmp_path / "k.spec.py")).specs[0]
    for sizes in spec.verification_sizes():
        x = make_inputs(spec, sizes, seed=3)
        assert x["row_ptr"][0] == 0 and x["row_ptr"][-1] == sizes["nnz"]
        assert x["col_idx"].size == 0 or x["col_idx"].max() < sizes["cols"]
