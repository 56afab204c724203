"""FSR of a host entry through every real gate on the fake GPU: a scripted LLM answers with
complete files, each built by nvcc through the fence, checked in a sandboxed GPU worker against
the spec and the original entry's outputs, timed, A/B-compared on one (fake) device, and proven
by compute-sanitizer (the stand-in in tests/fixtures/) before it is offered. The fake GPU's
"device" memory is host memory, so these launchers are loops, and run for real."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from scripted_llm import scripted_proposer

from kernel_lsp.compile import cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession
from kernel_lsp.model import TimingSettings
from kernel_lsp.optimizer.model import Status
from kernel_lsp.optimizer.session import RunRequest, run

pytestmark = [
    pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing"),
    pytest.mark.skipif(
        in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
    ),
]

FAKE_SANITIZER = Path(__file__).resolve().parents[1] / "fixtures" / "fake_sanitizer.py"
FAST = TimingSettings(warmup_s=0.0, budget_s=0.3, min_samples=15, max_samples=15)

# The original: right, and slow (the whole sum sixteen times over).
ORIGINAL = """\
#include <cstddef>

static void scale_rows(const float* x, float* y, int n, float alpha)
{
    for (int i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int k = 0; k < 16; ++k) acc += alpha * x[i] * 0.0625f;
        y[i] = acc;
    }
}

extern "C" void scale(const float* x, float* y, int n, float alpha)
{
    scale_rows(x, y, n, alpha);
}
"""
SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="scale",
    sizes=[{"n": 1000}, {"n": 1 << 16}],
    args={"x": In("float32"), "y": Out("float32"), "n": Scalar("int32"), "alpha": Scalar("float32", value=0.5)},
    reference=lambda x, alpha: {"y": alpha * x},
)
"""


def answer(code: str, words: str = "One multiply per element.") -> str:
    return f"Here is a faster version:\n\n```cpp\n{code}```\n\n{words}"


FAST_FILE = """\
extern "C" void scale(const float* x, float* y, int n, float alpha)
{
    for (int i = 0; i < n; ++i) y[i] = alpha * x[i];
}
"""
OFF_BY_ONE = FAST_FILE.replace("i < n;", "i < n - 1;")
SYSTEM = "#include <cstdlib>\n" + FAST_FILE.replace("{\n", '{\n    system("true");\n', 1)
REMEMBERS = """\
static const float* last_x = nullptr;

extern "C" void scale(const float* x, float* y, int n, float alpha)
{
    if (x == last_x) return;  // "already done"
    last_x = x;
    for (int i = 0; i < n; ++i) y[i] = alpha * x[i];
}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "scale.cu").write_text(ORIGINAL)
    (tmp_path / "scale.spec.py").write_text(SPEC)
    return tmp_path


def fsr(folder: Path, script: dict):
    proposer, _ = scripted_proposer(script)
    req = RunRequest(
        path=str(folder / "scale.cu"),
        kernel="scale",
        rounds=1,
        candidates=len(script),
        use_cache=False,
        workspace=str(folder),
        settings=_settings(),
    )
    with GpuSession(fake=True, timing=FAST) as gpu:
        return run(req, session=gpu, proposer=proposer)


def _settings():
    from kernel_lsp.config import Settings

    return Settings(arch=("sm_90",), include_dirs=tuple(cuda_include_dirs()))


def test_complete_files_are_verified_sandboxed_timed_and_the_right_one_offered(folder, monkeypatch):
    monkeypatch.delenv("KERNEL_LSP_COMPUTE_SANITIZER", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no compute-sanitizer here
    script = {
        (1, 1): answer(OFF_BY_ONE),
        (1, 2): answer(SYSTEM),
        (1, 3): answer(REMEMBERS, "Skips the work when the input has not changed."),
        (1, 4): answer(FAST_FILE),
    }
    result = fsr(folder, script)
    assert result.baseline.status is Status.CORRECT, result.verdict
    off, system, remembers, fast = result.outcomes
    # The real verifier, in the sandboxed worker: the last element still holds the poison.
    assert off.status is Status.INCORRECT and "mismatch" in off.message and "999" in off.message, off.message
    assert system.status is Status.UNSAFE and "calls `system`" in system.message
    assert remembers.status is Status.UNSAFE and "new mutable host static `last_x`" in remembers.message
    assert fast.status is Status.CORRECT and fast.speedup and fast.speedup > 2, (fast.status, fast.message)
    assert result.accepted is fast and result.comparison and result.comparison.ci_low > 1.02, result.verdict
    assert result.comparison.samples >= 15
    assert "compute-sanitizer is not installed here: the proof gate was skipped" in result.verdict
    # The LLM's launchers ran in the sandboxed worker, and the report says how it was confined.
    assert result.sandbox.startswith("a sandboxed GPU worker (writes: landlock"), result.sandbox
    assert "network: seccomp" in result.sandbox
    assert "compute-sanitizer is not installed here" in Path(result.report_paths[1]).read_text()


def test_the_proof_gate_blocks_the_offer_with_the_sanitizers_message_at_the_line(folder, monkeypatch):
    # The tool over an LLM's launch gets a clean environment (no secrets): the stand-in's finding
    # is set by a wrapper, as a real sanitizer's options would be.
    # The wrapper and what it runs in a folder of their own: the tool runs inside bubblewrap,
    # where only its own folder is bound beside the sandbox's roots.
    tool = folder / "tool"
    tool.mkdir()
    shutil.copy(FAKE_SANITIZER, tool / "fake_sanitizer.py")
    wrapper = tool / "compute-sanitizer"
    wrapper.write_text(
        "#!/bin/sh\nFAKE_SANITIZER_FINDING='initcheck:scale.cu:3:Uninitialized __global__ memory read' "
        f'exec "{sys.executable}" "{tool / "fake_sanitizer.py"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("KERNEL_LSP_COMPUTE_SANITIZER", str(wrapper))
    result = fsr(folder, {(1, 1): answer(FAST_FILE)})
    (fast,) = result.outcomes
    assert fast.status is Status.SANITIZER and result.accepted is None, result.verdict
    assert "line 3: initcheck: read of uninitialized global memory" in fast.message  # no tool text
    assert "`for (int i = 0; i < n; ++i) y[i] = alpha * x[i];`" in fast.message  # the candidate's line 3
    assert result.verdict.startswith("nothing offered: compute-sanitizer found a bug in r1c1")
    assert set(fast.proof.tools) == {"memcheck", "racecheck", "initcheck", "synccheck"}
