"""The tuner on launchers (entry specs): its candidates are the user's own file with other
constants, trusted from the first gate to the A/B (a file with <iostream> is never fenced; before,
every candidate's A/B failed on the fence's "imports `std::cerr`"), and it tunes what launchers
hold: block sizes, grid caps, template arguments of launched kernels, tile constants, bounded by
the launch limits; where there is nothing, the error says why."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.entry_skeleton import launcher_entries
from kernel_lsp.gpu import GpuSession, build_library
from kernel_lsp.host_launch.launcher import entry_kernels
from kernel_lsp.host_launch.tunables import launch_constants, static_shared_bytes
from kernel_lsp.model import TimingSettings
from kernel_lsp.optimizer.loop import Target
from kernel_lsp.optimizer.model import Status
from kernel_lsp.optimizer.proposers.tuner import TunerProposer, tune_space
from kernel_lsp.optimizer.session import OptimizeError, RunRequest, choose_proposer, run
from kernel_lsp.optimizer.tunables import apply_config
from kernel_lsp.spec import load_specs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAUNCHERS = FIXTURES / "launchers"
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")
FAST = TimingSettings(warmup_s=0.0, budget_s=0.05, min_samples=15, max_samples=15)


def _settings():
    from kernel_lsp.config import Settings

    return Settings(arch=("sm_90",), include_dirs=tuple(cuda_include_dirs()))


@needs_nvcc
def test_tuner_candidates_of_a_file_with_iostream_are_never_fenced(tmp_path):
    for suffix in (".cu", ".spec.py"):
        shutil.copy(FIXTURES / "tuner_entries" / f"scale_iostream{suffix}", tmp_path / f"scale{suffix}")
    source = (tmp_path / "scale.cu").read_text()
    # What the fence says of the same text from an LLM: <iostream>'s imports are not allowed.
    options = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
    fenced = build_library(source.replace("= 256;", "= 128;"), str(tmp_path / "scale.cu"), options, source)
    assert fenced.fence and any("imports `_ZSt4cerr`" in f.describe() for f in fenced.fence)
    req = RunRequest(
        path=str(tmp_path / "scale.cu"),
        kernel="scale",
        rounds=2,
        candidates=2,
        use_cache=False,
        workspace=str(tmp_path),
        proposer="tune",
        settings=_settings(),
    )
    with GpuSession(fake=True, timing=FAST) as gpu:
        result = run(req, session=gpu)
    assert result.baseline.status is Status.CORRECT, result.baseline.message
    assert len(result.outcomes) >= 3  # the strategy's picks, two rounds
    for o in result.outcomes:
        assert o.trusted and o.status is Status.CORRECT, (o.id, o.status, o.message)
        assert "host code not run" not in (o.message or ""), o.message
    # The A/B ran as the user's code too (it was fenced and failed before).
    assert result.comparison is not None and result.comparison.problems == [], (
        result.verdict,
        result.baseline.latency_s,
        [(o.id, o.note, o.latency_s) for o in result.outcomes],
    )
    assert "fence" not in result.verdict and "host code not run" not in result.verdict


@pytest.mark.parametrize("name", sorted(p.stem for p in LAUNCHERS.glob("*.cu")))
def test_the_tuner_finds_tunable_points_in_each_launcher_file(name):
    source = (LAUNCHERS / f"{name}.cu").read_text()
    kernels = entry_kernels(source, launcher_entries(source)[0])
    space = tune_space(source, kernels)
    assert space, name
    for key, values in space.items():
        current = next(c for c in launch_constants(source, kernels) if c.key == key).value
        other = next(v for v in values if v != str(current))
        assert apply_config(source, {key: other}) != source, (name, key)


def test_grid_caps_and_template_arguments_are_tuned_with_the_block():
    roles = {}
    for name in ("reduce_sum_bf16", "vector_add_fp32", "softmax_fp32"):
        source = (LAUNCHERS / f"{name}.cu").read_text()
        kernels = entry_kernels(source, launcher_entries(source)[0])
        roles[name] = {c.name: c.role for c in launch_constants(source, kernels)}
    assert roles["reduce_sum_bf16"] == {"BLOCK": "block", "MAX_BLOCKS": "grid"}
    assert roles["vector_add_fp32"] == {"threads": "block", "ITEMS": "template"}
    assert roles["softmax_fp32"] == {"THREADS": "block"}  # MAX_COLS is a guard, not a launch's
    source = (LAUNCHERS / "vector_add_fp32.cu").read_text()
    changed = apply_config(source, {"ITEMS@6": "8"})
    assert "constexpr int ITEMS = 8;" in changed and changed.count("ITEMS") == source.count("ITEMS")


TILED = textwrap.dedent(
    """\
    #define TILE 32
    #define ROWS 8
    template <int VEC>
    __global__ void transpose_tiled(const float* in, float* out, int n)
    {
        __shared__ float t[TILE][TILE * 4 + 1];
        int x = blockIdx.x * TILE + threadIdx.x;
        for (int j = 0; j < TILE; j += ROWS) t[threadIdx.y + j][threadIdx.x] = in[(blockIdx.y * TILE + threadIdx.y + j) * n + x];
        __syncthreads();
        for (int j = 0; j < TILE; j += ROWS) out[x * n + blockIdx.y * TILE + threadIdx.y + j] = t[threadIdx.x][threadIdx.y + j] * VEC;
    }
    extern "C" void transpose(const float* in, float* out, int n)
    {
        dim3 block(TILE, ROWS);
        dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
        transpose_tiled<2><<<grid, block>>>(in, out, n);
    }
    """
)
TILED_SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(entry="transpose", sizes=[{"n": 64}, {"n": 256}],
            args={"in": In("float32", shape="(n, n)"), "out": Out("float32", shape="(n, n)"), "n": Scalar("int32")},
            reference=lambda **a: {"out": 2 * a["in"].T})
"""


def test_tiles_and_template_literals_within_the_shared_memory_limit(tmp_path):
    found = {c.key: (c.role, c.choices) for c in launch_constants(TILED, ["transpose_tiled"])}
    assert found["TILE"][0] == "block" and found["ROWS"][0] == "block"
    assert found["tmpl.transpose_tiled.0@16"] == ("template", (1, 2, 4, 8))
    assert static_shared_bytes(TILED, ["transpose_tiled"]) == {"transpose_tiled": 32 * 129 * 4}
    (tmp_path / "t.cu").write_text(TILED)
    (tmp_path / "t.spec.py").write_text(TILED_SPEC)
    spec = load_specs(str(tmp_path / "t.spec.py")).specs[0]
    tuner = TunerProposer(TILED, spec, ["transpose_tiled"], "sm_90")
    tiles = {c["TILE"] for c in tuner.space}
    # TILE=64: 64 x 8 threads fit, but 64 x 257 floats (65 KiB) of shared memory do not.
    assert "32" in tiles and "64" not in tiles
    assert apply_config(TILED, {"tmpl.transpose_tiled.0@16": "4"}).count("transpose_tiled<4><<<") == 1
    # A tile constant that is no launch's (read only by the kernel's body).
    tile_only = TILED.replace("dim3 block(TILE, ROWS);", "dim3 block(32, 8);").replace(
        "(n + TILE - 1) / TILE", "(n + 31) / 32"
    )
    roles = {c.name: c.role for c in launch_constants(tile_only, ["transpose_tiled"])}
    assert roles["TILE"] == "tile" and roles["ROWS"] == "tile"


def test_nothing_to_tune_says_why(tmp_path):
    source = textwrap.dedent(
        """\
        __global__ void k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0; }
        extern "C" void zero(float* x, int n, int threads) { k<<<(n + threads - 1) / threads, threads>>>(x, n); }
        """
    )
    (tmp_path / "z.cu").write_text(source)
    (tmp_path / "z.spec.py").write_text(
        "from kernel_lsp.spec import Out, Scalar, Spec\n"
        'SPEC = Spec(entry="zero", sizes=[{"n": 10}], args={"x": Out("float32"), "n": Scalar("int32"),\n'
        '            "threads": Scalar("int32", value=128)}, reference=lambda n: {"x": [0.0] * n})\n'
    )
    spec = load_specs(str(tmp_path / "z.spec.py")).specs[0]
    target = Target(str(tmp_path / "z.cu"), source, spec, entry_kernels(source, "zero"))
    req = RunRequest(path=str(tmp_path / "z.cu"), kernel="zero", proposer="tune")
    with pytest.raises(OptimizeError) as e:
        choose_proposer(req, target, "sm_90")
    message = str(e.value)
    assert "nothing to tune in z.cu" in message
    assert "takes its block `threads` from the parameter(s) `threads` of `zero`" in message
