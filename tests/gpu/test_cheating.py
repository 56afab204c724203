"""The cheating suite (issues 3 and 12): deliberately cheating or broken kernels, each rejected
with the right reason or timed no faster than the honest kernel, the session still answering
afterwards; honest kernels that use atomics, a self-resetting `__device__` counter or printf stay
accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.source import find_kernels

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
SPEC = str(FIXTURES / "vadd.spec.py")


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(launch_timeout_s=3.0, timing=TimingSettings(budget_s=0.2)) as session:
        assert session.available, session.reason
        yield session


def check(gpu: GpuSession, name: str):
    path = FIXTURES / f"{name}.cu"
    return gpu.check(GpuCheckRequest(path.read_text(), str(path), kernel="vadd", spec=SPEC))


# fixture -> (accepted problem kinds, words the message must contain)
CHEATS = {
    "stale_noop": ({"mismatch"}, "poison"),
    "constant": ({"mismatch"}, "elements wrong"),
    "half_work": ({"mismatch"}, "elements wrong"),
    "oob_write": ({"guard"}, "out-of-bounds write"),
    "input_overwrite": ({"input_modified"}, "input `a` was modified"),
    # A race that loses every time is a plain mismatch; one that loses sometimes is caught by
    # the re-run. Both reject it.
    "race": ({"race", "mismatch"}, "case"),
    "infinite_loop": ({"timeout"}, "timed out after 3 s in case n=1"),
    "illegal_address": ({"crash"}, "illegal memory access in case n=1"),
    # Skips elements whose output already looks done: the re-run (poison 0xA5, plausible) or the
    # timed launches (a random poison each) leave it wrong.
    "skip_done": ({"race", "mismatch", "timing_mismatch"}, "case"),
}

# Cheats that live on state surviving between launches. With the module's globals put back to
# their loaded image before every launch, each launch computes: they are right, and no faster
# than the honest kernel (issue 12: the memoising SGEMM was "27x faster").
STATEFUL = ["pointer_cache", "memo_values", "launch_counter"]


def test_control_kernel_passes(gpu):
    result = check(gpu, "good")
    assert result.ok, result.message
    assert result.timings and result.timings[0].measurement.n >= 10


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheat_is_rejected_and_session_survives(gpu, name):
    kinds, words = CHEATS[name]
    result = check(gpu, name)
    assert not result.ok, f"{name} was accepted"
    assert result.problems[0].kind in kinds, result.message
    assert words in result.message, result.message
    kernel_line = find_kernels((FIXTURES / f"{name}.cu").read_text())[0].line
    assert result.diagnostics and result.diagnostics[0].line == kernel_line  # at the kernel
    # The session still answers: the control kernel verifies right after.
    after = gpu.check(
        GpuCheckRequest(
            (FIXTURES / "good.cu").read_text(),
            str(FIXTURES / "good.cu"),
            kernel="vadd",
            spec=SPEC,
            measure=False,
        )
    )
    assert after.ok, f"after {name}: {after.message}"


def test_candidate_checked_against_original_outputs(gpu):
    original = (FIXTURES / "good.cu").read_text()
    result = gpu.check(
        GpuCheckRequest(
            original, str(FIXTURES / "good.cu"), kernel="vadd", spec=SPEC, measure=False, reference=original
        )
    )
    assert result.ok, result.message
    bad = gpu.check(
        GpuCheckRequest(
            (FIXTURES / "half_work.cu").read_text(),
            str(FIXTURES / "half_work.cu"),
            kernel="vadd",
            spec=SPEC,
            measure=False,
            reference=original,
        )
    )
    assert not bad.ok


def _median(result) -> float:
    assert result.ok, result.message
    return result.timings[-1].measurement.median_s


@pytest.mark.xdist_group("timing")  # medians compared: one timing test at a time
@pytest.mark.parametrize("name", STATEFUL)
def test_state_between_launches_buys_no_speed(gpu, name):
    honest = _median(check(gpu, "good"))
    result = check(gpu, name)
    assert result.ok, f"{name}: {result.message}"  # every launch computed: the answer is right
    t = result.timings[-1]
    assert t.suspicious is None and t.over_bound is None
    print(f"ISSUE12 {name}: {t.measurement.median_s * 1e6:.2f} us vs honest {honest * 1e6:.2f} us")
    assert t.measurement.median_s >= 0.9 * honest, (name, t.measurement.median_s, honest)


def test_time_below_the_compute_bound_is_suspicious(gpu):
    """A spec whose work claims far more flops than the time allows: flagged, not a figure."""
    path = FIXTURES / "good.cu"
    spec = str(FIXTURES / "vadd_overclaimed.spec.py")
    result = gpu.check(GpuCheckRequest(path.read_text(), str(path), kernel="vadd", spec=spec))
    assert not result.ok and result.problems[0].kind == "suspicious", result.message
    assert "below the compute bound" in result.message and "float32 peak" in result.message
    t = result.timings[-1]
    assert t.roofline > 1 and t.over_bound and t.roofline_text.startswith("⚠")
    assert result.diagnostics[0].severity.label == "warning"
    print(f"ISSUE12 compute bound: {t.roofline_text}: {t.suspicious}")


def test_constant_output_named_under_a_loose_tolerance(gpu):
    path = FIXTURES / "softmax_zeros.cu"
    spec = str(FIXTURES / "softmax_loose.spec.py")
    result = gpu.check(GpuCheckRequest(path.read_text(), str(path), kernel="softmax", spec=spec))
    assert not result.ok and result.problems[0].kind == "mismatch", result.message
    assert "the output is constant: every element is 0 (all zeros)" in result.message, result.message


@pytest.mark.parametrize(
    "name, spec",
    [("sum_atomic", "sum.spec.py"), ("sum_threadfence", "sum.spec.py"), ("printf_vadd", "vadd.spec.py")],
)
def test_honest_kernels_stay_accepted(gpu, name, spec):
    path = FIXTURES / f"{name}.cu"
    kernel = "sum" if spec == "sum.spec.py" else "vadd"
    result = gpu.check(GpuCheckRequest(path.read_text(), str(path), kernel=kernel, spec=str(FIXTURES / spec)))
    assert result.ok, f"{name}: {result.message}"
    t = result.timings[-1]
    assert t.suspicious is None and t.measurement.n >= 10
    print(f"ISSUE12 honest {name}: {result.headline}")


# The fastest tuned points of the suite (samples/results/suite_h200.md): honest, and 102-103% of a
# bound measured by the device-to-device copy alone, so a copy-only bound called them suspicious.
TUNED = [
    ("vector_add/vector_add_fp32.cu", {"BLOCK": 1024, "ITEMS": 1, "VEC": 4}),
    ("vector_add/vector_add_bf16.cu", {"BLOCK": 1024, "ITEMS": 1, "VEC": 8}),
    ("silu_and_mul/silu_and_mul_fp32.cu", {"BLOCK": 256, "ITEMS": 1, "VEC": 4}),
]


@pytest.mark.xdist_group("timing")
@pytest.mark.parametrize("sample, defines", TUNED)
def test_fastest_tuned_samples_stay_under_the_memory_bound(gpu, sample, defines):
    path = Path(__file__).parents[2] / "samples" / sample
    source = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + path.read_text()
    result = gpu.check(GpuCheckRequest(source, str(path), spec=str(path.with_suffix(".spec.py"))))
    assert result.ok, f"{sample}: {result.message}"
    t = result.timings[-1]
    assert t.suspicious is None and t.over_bound is None and t.roofline <= 1.0, result.headline
    print(f"ISSUE12 tuned {sample}: {result.headline}")
