"""The cheating suite (issue 3): deliberately cheating or broken kernels, each rejected with the
right reason, and the session still answering afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.gpu import GpuSession
from kernel_lsp.runner.timing import TimingSettings
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
    return gpu.check(path.read_text(), str(path), SPEC, "vadd")


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
    "pointer_cache": ({"mismatch"}, "elements wrong"),
}


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
        (FIXTURES / "good.cu").read_text(), str(FIXTURES / "good.cu"), SPEC, "vadd", measure=False
    )
    assert after.ok, f"after {name}: {after.message}"


def test_candidate_checked_against_original_outputs(gpu):
    original = (FIXTURES / "good.cu").read_text()
    result = gpu.check(
        original, str(FIXTURES / "good.cu"), SPEC, "vadd", measure=False, reference_outputs_from=original
    )
    assert result.ok, result.message
    bad = gpu.check(
        (FIXTURES / "half_work.cu").read_text(),
        str(FIXTURES / "half_work.cu"),
        SPEC,
        "vadd",
        measure=False,
        reference_outputs_from=original,
    )
    assert not bad.ok
