"""FSR of host entries on a real GPU (issue 21, part 3): a scripted LLM answers with complete
files for the entry samples (samples/entries/); every gate is real: the signature check, the
fence, the nvcc library build, verification in a sandboxed worker against the spec and the
original entry's outputs, timing, the interleaved A/B on one GPU, compute-sanitizer before the
offer. About 30 s on an H100. The `FSR-ENTRY` lines are the summary for the issue's note."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scripted_llm import rewrite, scripted_proposer

from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.optimizer.model import Status
from kernel_lsp.optimizer.session import RunRequest, run
from kernel_lsp.runner.sanitizer import find_sanitizer

# A/B timings, one at a time, in a lane of their own beside the other A/B tests (.ci/gpu-run runs
# the groups side by side: each comparison interleaves its two kernels, so the load of the other
# lanes falls on both).
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("timing-entry")]

ENTRIES = Path(__file__).resolve().parents[2] / "samples" / "entries"
FAST = TimingSettings(budget_s=0.2)


@pytest.fixture(autouse=True)
def no_profiles(monkeypatch):
    """The rounds here are about the fence and the gates; a profile of each baseline and best
    (seconds of ncu, one at a time on the machine) is tested in test_profile_gpu.py."""
    monkeypatch.setenv("KERNEL_LSP_NCU", "/nonexistent/ncu")


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(timing=FAST) as session:
        assert session.available, session.reason
        yield session


def fsr(gpu: GpuSession, tmp_path: Path, sample: str, answers: list[str]):
    for suffix in (".cu", ".spec.py"):
        shutil.copy(ENTRIES / f"{sample}{suffix}", tmp_path / f"{sample}{suffix}")
    proposer, _ = scripted_proposer({(1, i): rewrite(f"{sample}.{a}") for i, a in enumerate(answers, 1)})
    from kernel_lsp.spec import load_specs

    spec = load_specs(str(tmp_path / f"{sample}.spec.py")).specs[0]
    req = RunRequest(
        path=str(tmp_path / f"{sample}.cu"),
        kernel=spec.kernel,
        rounds=1,
        candidates=len(answers),
        use_cache=False,
        workspace=str(tmp_path),
    )
    result = run(req, session=gpu, proposer=proposer)
    for name, o in zip(answers, result.outcomes, strict=True):
        speed = f" {o.speedup:.2f}x" if o.speedup else ""
        why = o.message.splitlines()[0] if o.message else ""
        print(f"FSR-ENTRY {sample}.{name}: {o.status.value}{speed} in {o.seconds:.1f} s {why}")
    print(f"FSR-ENTRY {sample} baseline in {result.baseline.seconds:.1f} s; A/B: {result.comparison}")
    print(f"FSR-ENTRY {sample} verdict: {result.verdict}")
    print(f"FSR-ENTRY {sample} sandbox: {result.sandbox}")
    return result


# Alone on the GPU: judged end to end, beside five other tests on an H200, the A/B's last timed
# outputs of one input set held the poison once (the round offered nothing); alone it was
# accepted at 1.87x [1.80, 1.96] and proven (this session's device runs). Open: why, under load.
@pytest.mark.quiet
def test_a_fused_layernorm_written_as_a_complete_file_is_accepted_and_the_race_is_not(gpu, tmp_path):
    """The original: three kernels, temporaries and a cudaMemset between them. The fused
    rewrite (one kernel, no temporaries, a renamed kernel) is verified against the spec and the
    original's outputs, timed, A/B-compared and proven; the same file with a barrier missing is
    stopped by verification or, failing that, by compute-sanitizer."""
    result = fsr(gpu, tmp_path, "layernorm_fp32", ["fused", "race"])
    assert result.baseline.status is Status.CORRECT, result.verdict
    fused, race = result.outcomes
    assert fused.status is Status.CORRECT, fused.message
    assert result.accepted is fused, result.verdict
    assert result.comparison.ci_low > 1.02 and result.comparison.samples >= 15
    assert result.sandbox.startswith("a sandboxed GPU worker"), result.sandbox
    assert race.status in (Status.INCORRECT, Status.SANITIZER), (race.status, race.message)
    if find_sanitizer() is None:
        assert "compute-sanitizer is not installed here" in result.verdict
        return
    assert "found nothing" in result.verdict and fused.proof is not None and fused.proof.ran
    if race.status is Status.INCORRECT:  # the proof gate would have found the race too
        boxed = gpu.sandboxed_session()
        try:
            library = boxed.build_library(race.source, result.path, None, candidate_of=result.original)
            request = GpuCheckRequest(race.source, result.path, artifact=library)
            report = boxed.prove(request, tools=("racecheck",))
        finally:
            boxed.close()
        print("FSR-ENTRY race under racecheck:", [f.describe() for f in report.findings][:2], report.note)
        assert report.blocks_offer and any(f.tool == "racecheck" for f in report.findings)


def test_wrong_vector_add_rewrites_are_rejected_with_the_reason(gpu, tmp_path):
    result = fsr(gpu, tmp_path, "vector_add_bf16", ["off_by_one", "skips_large_n", "system_call"])
    assert result.baseline.status is Status.CORRECT, result.verdict
    off, skips, system = result.outcomes
    assert off.status is Status.INCORRECT, off.message
    assert skips.status is Status.INCORRECT and "n=33554432" in skips.message, skips.message
    assert system.status is Status.UNSAFE and "calls `system`" in system.message
    assert result.accepted is None
