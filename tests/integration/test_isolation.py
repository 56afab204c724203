"""Issue 12 without a GPU: module globals restored before every launch, timed launches on rotating
input sets with poisoned outputs, both roofline bounds, and constant outputs named. The worker runs
in its fake mode (kernel_lsp/runner/fake.py); the GPU cases are in tests/gpu/test_cheating.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from fixture_sources import FAKE_VADD_SPEC, FAKE_VADD_STEPS

from kernel_lsp.compile import CompileOptions, compile_source
from kernel_lsp.gpu import CaseTiming, GpuSession
from kernel_lsp.runner.fake import FakeDevice, fake_cubin
from kernel_lsp.runner.isolation import ModuleState, TimedSets, cubin_globals, set_count
from kernel_lsp.runner.roofline import figures
from kernel_lsp.runner.verify import Failed, compare_output
from kernel_lsp.spec import In, InOut, Out, Scalar, Spec, load_specs
from kernel_lsp.stats import Measurement

SPEC, STEPS = FAKE_VADD_SPEC, FAKE_VADD_STEPS


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


# --- globals ------------------------------------------------------------------------------------

GLOBALS_SOURCE = r"""
__device__ float memo[64];
__device__ int launches = 3;
__constant__ float table[4];
__device__ const int fixed = 2;
namespace cheat { __device__ unsigned long long key; }
extern "C" __global__ void k(float* out) {
  launches += 1;
  cheat::key = 1;
  memo[threadIdx.x] = table[0] + fixed;
  out[threadIdx.x] = memo[threadIdx.x];
}
"""


def test_cubin_globals_are_the_mutable_device_variables():
    result = compile_source(GLOBALS_SOURCE, "g.cu", CompileOptions(arch="sm_90"))
    assert result.ok, result.diagnostics
    names = cubin_globals(result.cubin)
    assert "memo" in names and "launches" in names
    assert any("key" in n for n in names)  # the namespaced one, under its mangled name
    assert "table" not in names  # __constant__: kernels cannot write it


def test_cubin_globals_never_raises():
    assert cubin_globals(b"") == [] and cubin_globals(b"\x7fELF\x02\x01" + b"\0" * 10) == []
    assert cubin_globals(fake_cubin({"k": "vadd"})) == []


def test_module_state_puts_the_loaded_image_back():
    device = FakeDevice()
    module = device.load(fake_cubin({"k": "counter"}))
    state = ModuleState.snapshot(device, module, b"")
    assert state.names == ["k_state"]
    ptr = module["k"].state
    device.upload(ptr, np.array([41], np.int32))
    state.restore()
    assert device.download(ptr, 4).view(np.int32)[0] == 0
    state.free()


@pytest.fixture(scope="module")
def session():
    with GpuSession(fake=True, launch_timeout_s=2.0) as s:
        yield s


def test_a_launch_counter_sees_its_loaded_image_every_launch(session, spec):
    """`counter` computes only while its global launch count is 0. Without the restore, the
    re-run of every verification case met a stale output; with it, every launch (verification,
    race re-run, timed) starts from the loaded image, so it does the full work each time."""
    r = session.check_compiled(fake_cubin({"k": "counter"}), STEPS, spec)
    assert r.ok, r.message
    assert r.timings and r.timings[0].measurement.n >= 15


# --- timed input sets ---------------------------------------------------------------------------


def _inout_spec() -> Spec:
    return Spec(
        kernel="k",
        sizes=[{"n": 64}],
        args={
            "a": In("float32"),
            "x": InOut("float32"),
            "c": Out("float32"),
            "n": Scalar("int32"),
        },
        reference=lambda a, x: {"c": a, "x": x + a},
    )


def test_timed_sets_rotate_poison_refresh_and_restore():
    device, spec = FakeDevice(), _inout_spec()
    restores = []
    sets = TimedSets(device, spec, {"n": 64}, 1234, lambda: restores.append(1), 4)
    try:
        assert len(sets.sets) == 4
        firsts = {float(s.inputs["a"][0]) for s in sets.sets}
        assert len(firsts) == 4  # distinct inputs per set
        order, poisons = [], set()
        for _ in range(24):
            sets.prepare()
            s = sets.sets[sets.current]
            order.append(sets.current)
            c = s.bufs.read("c").view(np.uint8)
            assert np.all(c == c[0])  # the whole output holds this launch's poison
            poisons.add(int(c[0]))
            np.testing.assert_array_equal(s.bufs.read("x"), s.inputs["x"])  # InOut refreshed
            s.bufs.upload("x", np.zeros(64, np.float32))  # what a launch would do to it
        assert order[:5] == [0, 1, 2, 3, 0]  # never the same set back to back
        assert len(poisons) > 1  # a kernel cannot learn the poison
        assert len(restores) == 24  # globals restored before every launch
    finally:
        sets.free()


def test_a_gated_sets_inputs_reach_its_buffers_only_when_it_is_prepared():
    """A judged candidate's sets (runner/judge.py maps their buffers into its process when it
    binds them): until the judge prepares a set for a run, inside the gate, its buffers hold no
    input, so nothing can be computed from a set before its run."""
    device, spec = FakeDevice(), _inout_spec()
    sets = TimedSets(device, spec, {"n": 64}, 1234, lambda: None, 3, gated=True)
    try:
        for s in sets.sets:
            for name in ("a", "x"):
                assert not s.bufs.read(name).any(), name  # zeros, whatever the set's inputs
        k = sets.choose(0)
        sets.prepare_set(k)
        s = sets.sets[k]
        np.testing.assert_array_equal(s.bufs.read("a"), s.inputs["a"])
        np.testing.assert_array_equal(s.bufs.read("x"), s.inputs["x"])
        others = [t for t in sets.sets if t is not s]
        assert all(not t.bufs.read("a").any() for t in others)
        s.bufs.upload("a", np.zeros(64, np.float32))  # the accused wrote over its inputs
        sets.prepare_set(k)
        np.testing.assert_array_equal(s.bufs.read("a"), s.inputs["a"])  # written again
    finally:
        sets.free()


def test_a_gated_side_runs_on_a_new_set_at_its_2nd_4th_and_8th_measured_run():
    device, spec = FakeDevice(), _inout_spec()
    sets = TimedSets(device, spec, {"n": 64}, 1234, lambda: None, 9, gated=True)
    try:
        sets.warming = True
        assert sets.choose(0) == 0 and sets.choose(1) == 0
        sets.stop_warming()
        new = []
        for _ in range(8):
            sets.choose(0)
            new.append(sets.new_to(0))
        assert new == [False, True, False, True, False, False, False, True], new
    finally:
        sets.free()


def test_outputs_of_timed_launches_are_checked():
    device, spec = FakeDevice(), _inout_spec()
    sets = TimedSets(device, spec, {"n": 64}, 1234, lambda: None, 2)
    try:
        sets.prepare()  # poisoned, and no launch wrote it
        with pytest.raises(Failed) as e:
            sets.check_outputs("n=64", lambda *a: None, include=sets.current)
        assert e.value.problem.kind == "timing_mismatch"
        assert "outputs of the timed launches are wrong" in e.value.problem.message
    finally:
        sets.free()


def test_verified_inputs_make_a_free_set_whose_outputs_are_always_checked():
    device, spec = FakeDevice(), _inout_spec()
    a = np.arange(64, dtype=np.float32)
    given = ({"a": a, "x": a.copy()}, {"c": a + 1000, "x": a})  # a reference the launch cannot meet
    sets = TimedSets(device, spec, {"n": 64}, 1234, lambda: None, 3, [given])
    try:
        assert sets.sets[1].inputs is given[0] and sets.sets[1].reference is given[1]
        np.testing.assert_array_equal(sets.sets[1].bufs.read("a"), a)
        for _ in range(3):  # every set launched once: "outputs" as the launch would write them
            sets.prepare()
            s = sets.sets[sets.current]
            s.bufs.upload("c", s.inputs["a"])
            s.bufs.upload("x", s.inputs["x"] + s.inputs["a"])
        with pytest.raises(Failed) as e:  # set 2 (the verified one) is checked, whatever the draw
            sets.check_outputs("n=64", lambda *a: None)
        assert "input set 2 of 3" in e.value.problem.message
    finally:
        sets.free()


def test_set_count_keeps_to_a_share_of_memory():
    spec = _inout_spec()
    assert set_count(spec, {"n": 64}, 1 << 30) == 3
    assert set_count(spec, {"n": 1 << 26}, 1 << 30) == 1  # 768 MiB a set


def test_set_count_keeps_to_a_share_of_host_memory_too():
    spec = _inout_spec()  # 12 MiB a set at n = 2^20
    assert set_count(spec, {"n": 1 << 20}, 1 << 40, 48) == 48
    assert set_count(spec, {"n": 1 << 20}, 1 << 40, 48, host_bytes=480 << 20) == 10
    assert set_count(spec, {"n": 1 << 20}, 1 << 40, 48, host_bytes=1 << 20) == 1  # at least one


def test_references_of_a_large_case_are_made_side_by_side_and_checked_in_order(monkeypatch):
    import threading

    from kernel_lsp.runner import case_memo

    device, spec, n = FakeDevice(), _inout_spec(), 1 << 21  # 24 MiB a set
    threads: list[str] = []
    real = case_memo.run_reference

    def noted(spec_, sizes_, inputs):
        threads.append(threading.current_thread().name)
        return real(spec_, sizes_, inputs)

    monkeypatch.setattr(case_memo, "run_reference", noted)
    sets = TimedSets(device, spec, {"n": n}, 1234, lambda: None, 4)
    try:
        for _ in range(4):  # every set launched: right outputs but for set 3's
            sets.prepare()
            s = sets.sets[sets.current]
            s.bufs.upload("c", s.inputs["a"] + (1.0 if sets.current == 2 else 0.0))
            s.bufs.upload("x", s.inputs["x"] + s.inputs["a"])
        with pytest.raises(Failed) as e:
            sets.check_outputs(f"n={n}", lambda *a: None, include=2)
        assert "input set 3 of 4" in e.value.problem.message
        assert len(threads) == 2  # set 3 and one drawn at random
        assert any(t.startswith("kernel-lsp-inputs") for t in threads)  # the second, beside the first
    finally:
        sets.free()


# --- roofline -----------------------------------------------------------------------------------

DEV = {"copy_bandwidth_Bps": 4.0e12, "peak_flops": {"float32": 60e12}, "peak_source": {"float32": "measured"}}


def _gemm_spec(work) -> Spec:
    return Spec(
        kernel="gemm",
        sizes=[{"n": 1024}],
        args={
            "a": In("float32", shape="n*n"),
            "b": In("float32", shape="n*n"),
            "c": Out("float32", shape="n*n"),
        },
        reference=lambda a, b: {"c": a},
        work=work,
    )


def test_time_below_the_compute_bound_is_suspicious():
    spec = _gemm_spec(lambda n: {"bytes": 12 * n * n, "flops": 2 * n**3})
    nbytes = {"a": 4 << 20, "b": 4 << 20, "c": 4 << 20}
    f = figures(spec, {"n": 1024}, nbytes, 14.9e-6, True, DEV)  # the memoised SGEMM of issue 12
    assert f["bound"] == "float32 peak" and f["roofline"] > 2
    assert "below the compute bound" in f["suspicious"] and "measured float32 peak" in f["suspicious"]
    assert f["over_bound"] == f["suspicious"]
    honest = figures(spec, {"n": 1024}, nbytes, 425e-6, True, DEV)
    assert honest["suspicious"] is None and honest["over_bound"] is None and honest["compute_bound"]


def test_over_100_percent_of_dram_is_flagged_and_warm_l2_is_not_called_suspicious():
    spec = _gemm_spec(lambda n: {"bytes": 120 * n * n})  # overstated bytes
    nbytes = {"a": 4 << 20, "b": 4 << 20, "c": 4 << 20}
    cold = figures(spec, {"n": 1024}, nbytes, 20e-6, True, DEV)
    assert cold["roofline"] > 1 and "over 100%" in cold["suspicious"]
    warm = figures(spec, {"n": 1024}, nbytes, 20e-6, False, DEV)
    assert warm["suspicious"] is None and "warm L2" in warm["over_bound"]
    t = CaseTiming(
        "n=1024",
        {},
        Measurement.from_dict(
            {"median_s": 20e-6, "p10_s": 0, "p90_s": 0, "n": 1, "cold_l2": False, "noise": 0}
        ),
        roofline=1.57,
        bound="DRAM",
    )
    assert t.roofline_text == "157% DRAM"
    t.over_bound = warm["over_bound"]
    assert t.roofline_text.startswith("⚠ 157% DRAM")


def test_work_names_the_dtype_of_its_peak_and_a_raising_work_is_a_note():
    dev = {**DEV, "peak_flops": {"float32": 60e12, "bfloat16": 900e12}}
    spec = _gemm_spec(lambda n: {"bytes": 12 * n * n, "flops": 2 * n**3, "dtype": "bfloat16"})
    nbytes = {"a": 4 << 20, "b": 4 << 20, "c": 4 << 20}
    f = figures(spec, {"n": 1024}, nbytes, 14.9e-6, True, dev)
    assert spec.work_for({"n": 2}) == {"bytes": 48.0, "flops": 16.0, "dtype": "bfloat16"}
    assert f["flops"] == 2 * 1024**3 and not f["bound_note"]
    assert f["bound"] == "DRAM" and f["suspicious"] is None  # 2.1 GFLOP in 2.4 us at the bf16 peak
    fp32 = figures(spec, {"n": 1024}, nbytes, 14.9e-6, True, {**dev, "peak_flops": {"float32": 60e12}})
    assert "below the compute bound" in fp32["suspicious"]  # no bf16 peak known: float32's
    broken = _gemm_spec(lambda n: {"bytes": 1 / 0})
    f = figures(broken, {"n": 1024}, nbytes, 14.9e-6, True, dev)
    assert "the spec's work raised ZeroDivisionError" in f["bound_note"] and f["bytes"] == 12 << 20


def test_spec_without_work_gets_minimal_bytes_and_says_no_compute_bound():
    spec = _gemm_spec(None)
    nbytes = {"a": 4 << 20, "b": 4 << 20, "c": 4 << 20}
    f = figures(spec, {"n": 1024}, nbytes, 10e-6, True, DEV)
    assert f["bytes"] == 12 << 20 and f["bound"] == "DRAM" and not f["compute_bound"]
    assert "no compute bound known" in f["bound_note"] and "minimal bytes" in f["bound_note"]
    assert f["suspicious"] is None and f["roofline"] == pytest.approx((12 << 20) / 4e12 / 10e-6)
    # 12 MiB take 3.1 us at 4 TB/s: 2 us cannot have moved them.
    assert (
        "below the speed-of-light bound" in figures(spec, {"n": 1024}, nbytes, 2e-6, True, DEV)["suspicious"]
    )


# --- constant outputs ---------------------------------------------------------------------------


def test_constant_output_is_named_even_inside_a_loose_tolerance():
    """A bf16 softmax over 4096 columns: every value is below bf16's default atol, so zeros pass
    the tolerance; they are still wrong, and the message says why."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 4096)).astype(np.float32)
    expected = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    zeros = np.zeros_like(expected).astype(ml_dtypes.bfloat16)
    msg = compare_output("y", zeros, expected, 1e-2, 1.6e-2)
    assert msg and "the output is constant: every element is 0 (all zeros)" in msg
    honest = expected.astype(ml_dtypes.bfloat16)
    assert compare_output("y", honest, expected, 1e-2, 1.6e-2) is None
    # A constant reference with a constant output is fine; one element is never "constant".
    assert compare_output("y", np.ones(8, np.float32), np.ones(8, np.float32), 1e-6, 1e-6) is None
    assert compare_output("y", np.zeros(1, np.float32), np.full(1, 1e-9, np.float32), 1e-6, 1e-6) is None


def test_over_the_bound_is_never_a_plain_figure_in_check_lines_and_headlines():
    from kernel_lsp.cli.formats import format_gpu_check
    from kernel_lsp.gpu import KernelCheck

    m = Measurement.from_dict(
        {"median_s": 20e-6, "p10_s": 0, "p90_s": 0, "n": 30, "cold_l2": False, "noise": 0}
    )
    t = CaseTiming(
        "n=1024", {}, m, roofline=1.57, bound="DRAM", over_bound="157% of the DRAM bound with a warm L2"
    )
    t.bound_note = "no compute bound known (the spec's work gives no flops)"
    k = KernelCheck("vadd", "ok", ok=True, timings=[t])
    line = format_gpu_check(k)
    assert "⚠ 157% DRAM (over the bound) roofline: 157% of the DRAM bound with a warm L2" in line
    assert "no compute bound known" in line
    assert "⚠ 157% DRAM" in k.headline
