"""Every check of the trusted path (runner/verify.py's list) holds where a judged candidate's
kernels run: in its accused process (runner/judge.py), on the fake GPU. Each bad kernel of the
fake menu is refused judged for the reason it is refused in-process, and the shared-memory
poison, which must be written in the context the kernels run in, is written there: the judge
asks, and the accused's copy of the judge's own poison kernel (loaded before any candidate
code) writes it. The GPU versions are tests/gpu/test_judge_gpu.py's."""

from __future__ import annotations

import numpy as np
import pytest
from fixture_sources import FAKE_VADD_SPEC, FAKE_VADD_STEPS

from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.runner.accused import Accused
from kernel_lsp.runner.fake import FakeDevice, fake_cubin
from kernel_lsp.spec import load_specs

needs_sandbox = pytest.mark.skipif(
    in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
)
FAST = TimingSettings(warmup_s=0.0, budget_s=0.02, min_samples=5, max_samples=10)
SPEC, STEPS = FAKE_VADD_SPEC, FAKE_VADD_STEPS
# behaviour -> the problem kinds the trusted path gives it
BAD = {
    "smem_uninit": {"mismatch"},  # reads shared memory nothing wrote: the poison shows it
    "noop": {"mismatch"},  # outputs poisoned: an unwritten output holds the poison
    "const": {"mismatch"},  # a constant output
    "half": {"mismatch"},
    "oob": {"guard"},  # guard bytes after the output
    "clobber": {"input_modified"},  # inputs unchanged
    # The same inputs run twice (a different element is wrong each launch: with one element,
    # every launch is wrong, a plain mismatch).
    "flaky": {"race", "mismatch"},
}


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


@pytest.fixture(scope="module")
def judged():
    with GpuSession(fake=True, timing=FAST, sandboxed=True, launch_timeout_s=5.0) as session:
        assert session.available, session.reason
        yield session


@pytest.fixture(scope="module")
def plain():
    with GpuSession(fake=True, timing=FAST, launch_timeout_s=5.0) as session:
        yield session


@needs_sandbox
@pytest.mark.parametrize("behaviour", list(BAD))
def test_each_bad_kernel_is_refused_judged_as_in_process(judged, plain, spec, behaviour):
    trusted = plain.check_compiled(fake_cubin({"k": behaviour}), STEPS, spec)
    assert not trusted.ok and trusted.problems[0].kind in BAD[behaviour], trusted.message
    result = judged.check_compiled(fake_cubin({"k": behaviour}), STEPS, spec)
    assert not result.ok, f"{behaviour} was accepted judged"
    assert result.problems[0].kind == trusted.problems[0].kind, (result.message, trusted.message)


@needs_sandbox
def test_an_honest_kernel_and_a_launch_counter_are_right_judged(judged, spec):
    for behaviour in ("vadd", "counter"):  # counter: right only with its global restored each launch
        result = judged.check_compiled(fake_cubin({"k": behaviour}), STEPS, spec)
        assert result.ok, f"{behaviour}: {result.message}"


@needs_sandbox
def test_an_uninitialized_shared_memory_read_is_caught_judged(judged, spec):
    """Shared memory poisoned in the judge's own context, which the accused's kernels never see,
    let this through judged (the published reduction at 9.9x, 'correct on every case')."""
    result = judged.check_compiled(fake_cubin({"k": "smem_uninit"}), STEPS, spec)
    assert not result.ok and result.problems[0].kind == "mismatch", result.message
    assert "n=1" in result.problems[0].case


def _accused(tmp_path) -> Accused:
    accused = Accused(FakeDevice(), str(tmp_path))
    (tmp_path / "helpers.bin").write_bytes(FakeDevice().helpers_image())
    (tmp_path / "image.bin").write_bytes(fake_cubin({"k": "smem_uninit"}))
    return accused


def test_the_accused_poisons_its_shared_memory_before_each_run_it_is_asked_to(tmp_path):
    accused = _accused(tmp_path)
    assert accused.load_helpers({"image": "helpers.bin"}) == {"status": "ok"}
    assert accused.load({"image": "image.bin", "steps": STEPS})["status"] == "ok"
    memory = [accused.device.alloc(16) for _ in range(3)]
    accused.buffers = dict(enumerate(memory))
    args = [{"buf": k, "off": 0} for k in range(3)] + [{"bytes": np.array([4], np.int32).tobytes().hex()}]
    call = {"kind": "kernel", "step": 0, "grid": [1, 1, 1], "block": [1, 1, 1], "smem": 0, "args": args}
    assert accused.bind({"binding": 1, "calls": [call]}) == {"status": "ok"}
    out = lambda: accused.device.download(memory[2], 16).view(np.float32)  # noqa: E731
    assert accused.run({"bindings": [1]}) == {"status": "ok"}
    assert np.all(out() == 0.0)  # lucky zeros: a + b of zeros, plus zeros read
    assert accused.run({"bindings": [1, 1], "smem_poison": [0xFF, None]}) == {"status": "ok"}
    assert np.all(out() == 0.0)  # the second run was not poisoned: the first one's poison is gone
    assert accused.run({"bindings": [1], "smem_poison": [0xFF]}) == {"status": "ok"}
    assert np.all(np.isnan(out()))  # the poison, read as a float: NaN


def test_the_accused_takes_the_judges_helpers_only_before_candidate_code(tmp_path):
    accused = _accused(tmp_path)
    assert accused.load({"image": "image.bin", "steps": STEPS})["status"] == "ok"
    assert accused.load_helpers({"image": "helpers.bin"})["status"] == "fault"
    assert not accused.helpers
    accused.plans[1] = []
    with pytest.raises(ValueError):  # a poison asked without the judge's kernel is refused
        accused.run({"bindings": [1], "smem_poison": [0xFF]})
