"""Issue 31's scratch rule on the GPU: LLM-style answers that add a `__device__` scratch global
every use re-initialises first (tests/fixtures/scratch_globals/ok_*, shaped like a published
layer_norm answer's `d_sum_coop`) are judged on the GPU and verified right on every case, run
after run; answers whose global keeps state between calls (a counter, a memo) are refused before
any of their code runs. One optimize round through the real session (fence, nvcc, the judge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_llm import scripted_round

from kernel_lsp.gpu import GpuSession
from kernel_lsp.optimizer.model import Status
from kernel_lsp.spec import load_specs

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scratch_globals"
ALLOWED = ["ok_cooperative_self_init", "ok_launcher_memcpy_to_symbol", "ok_launcher_memset_address"]
REFUSED = ["bad_call_counter", "bad_memo"]
SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="total",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 65_537}],
    args={
        "x": In("float32", shape="n"),
        "out": Out("float32", shape="1", atol=1e-2, rtol=1e-4),  # float atomics: any order
        "n": Scalar("int32"),
    },
    reference=lambda x: {"out": x.sum(dtype="float64").reshape(1)},
)
"""


@pytest.fixture(scope="module")
def gpu():
    with GpuSession() as session:
        assert session.available, session.reason
        yield session


def answer(name: str) -> str:
    return f"Here is a faster version:\n```cuda\n{(FIXTURES / f'{name}.cu').read_text()}```\n"


def test_scratch_every_use_resets_is_verified_and_state_is_refused(gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_LSP_NCU", "/nonexistent/ncu")  # profiles are not the question
    (tmp_path / "total.cu").write_text((FIXTURES / "original.cu").read_text())
    (tmp_path / "total.spec.py").write_text(SPEC)
    spec = load_specs(str(tmp_path / "total.spec.py")).specs[0]
    names = ALLOWED + REFUSED
    texts = [answer(n) for n in names]
    result = scripted_round(gpu, str(tmp_path / "total.cu"), spec.kernel, texts, str(tmp_path))
    assert len(result.outcomes) == len(names), f"{result.stop_reason}: {result.verdict}"
    got = dict(zip(names, result.outcomes, strict=True))
    print("\nSCRATCH-GPU " + ", ".join(f"{n}={o.status.value}" for n, o in got.items()))
    for name in ALLOWED:
        outcome = got[name]
        assert outcome.status is Status.CORRECT, f"{name}: {outcome.message}"
        assert any("new `__device__` scratch" in f for f in outcome.findings), (name, outcome.findings)
    for name in REFUSED:
        outcome = got[name]
        assert outcome.status is Status.UNSAFE, f"{name}: {outcome.status.value}: {outcome.message}"
        assert "new mutable global" in outcome.message, (name, outcome.message)
