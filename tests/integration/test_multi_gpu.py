"""Several GPUs without a GPU: fake-GPU workers on distinct device indices. `--check` spreads
spec'd files over them and the optimizer checks a round's candidates in parallel; either way the
verdicts equal the serial run's, and a killed worker costs only its own file or candidate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixture_sources import FAKE_VADD_SPEC, VADD
from test_evaluation import _fake_compile

from kernel_lsp.check import FileCheck
from kernel_lsp.compile import CompileOptions
from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.gpu import GpuSession
from kernel_lsp.gpu_check import verify_checks
from kernel_lsp.model import TimingSettings
from kernel_lsp.optimizer.evaluator import GpuEvaluator
from kernel_lsp.optimizer.loop import LoopSettings, Target, optimize
from kernel_lsp.optimizer.model import Proposal, Status
from kernel_lsp.optimizer.proposers.base import Proposer
from kernel_lsp.spec import load_specs
from kernel_lsp.workspace import Workspace

SPEC = FAKE_VADD_SPEC


@pytest.fixture
def fake_gpus(monkeypatch, fake_gpu):
    """Every GpuSession is a fake-GPU worker; `compile` makes the fake image the source names."""
    monkeypatch.setattr(GpuSession, "compile", _fake_compile)


def with_behaviour(behaviour: str, extra: str = "") -> str:
    return VADD.replace("if (i < n)", f"// fake: {behaviour} {extra}\n    if (i < n)")


# --- --check --gpus --------------------------------------------------------------------------------


def spec_d_files(tmp_path: Path) -> list[str]:
    # Correct kernels are the fake's 2 ms one: the instant one can fall under the speed-of-light
    # bound of a bandwidth measured on a busy CPU.
    paths = []
    for name, behaviour in [("a", "slow"), ("b", "const"), ("c", "crash"), ("d", "slow"), ("e", "slow")]:
        (tmp_path / f"{name}.cu").write_text(with_behaviour(behaviour))
        (tmp_path / f"{name}.spec.py").write_text(SPEC)
        paths.append(str(tmp_path / f"{name}.cu"))
    return paths


def verdicts(checks: list[FileCheck]) -> list[tuple[str, str, bool]]:
    return [(Path(c.path).name, k.status, k.ok) for c in checks for k in c.gpu_checks]


def test_check_on_two_gpus_equals_one_and_a_crash_costs_only_its_file(fake_gpus, tmp_path):
    paths = spec_d_files(tmp_path)
    serial = [FileCheck(p) for p in paths]
    parallel = [FileCheck(p) for p in paths]
    lines: list[str] = []
    assert verify_checks(serial, Workspace.fixed(Settings()), gpus="1", progress=lines.append) is not None
    assert lines == []  # one GPU: the output is as before
    device = verify_checks(parallel, Workspace.fixed(Settings()), gpus="2", progress=lines.append)
    assert device is not None and device.startswith("2 GPUs")
    assert (
        verdicts(parallel)
        == verdicts(serial)
        == [
            ("a.cu", "ok", True),
            ("b.cu", "failed", False),
            ("c.cu", "failed", False),
            ("d.cu", "ok", True),
            ("e.cu", "ok", True),
        ]
    )
    crash = parallel[2].gpu_checks[0]
    assert crash.problems[0].kind == "crash"
    assert any(d.code == "gpu-crash" for d in parallel[2].diagnostics)
    # Each line says which GPU did the file; both did some.
    assert len(lines) == 5
    assert {re.match(r"kernel-lsp: GPU (\d):", line).group(1) for line in lines} == {"0", "1"}
    assert {k.device_index for c in parallel for k in c.gpu_checks} == {0, 1}


def test_gpu_devices_setting():
    settings, problems = settings_from_dict({"gpu": {"devices": "all"}})
    assert settings.gpu_devices == "all" and problems == []
    settings, problems = settings_from_dict({"kernelLsp.gpu.devices": 2})
    assert settings.gpu_devices == "2"
    settings, problems = settings_from_dict({"gpu": {"devices": "many"}})
    assert settings.gpu_devices is None and "gpu.devices" in problems[0]


# --- the optimizer ------------------------------------------------------------------------------


class Scripted(Proposer):
    name = "scripted"

    def __init__(self, rounds: list[list[Proposal]]):
        self.rounds = rounds

    def propose(self, ctx):
        return self.rounds[ctx.round - 1] if ctx.round <= len(self.rounds) else []


def scripted_round(sessions: list[GpuSession], tmp_path: Path, inspect=lambda sessions: None):
    """One FSR round of six scripted candidates (wrong, crashing, right, slower, right again,
    half done) over `sessions`; `inspect(judged)` runs before they are closed, on the judged
    sessions the candidates ran in. Shared with the Ray tests, so local and Ray rounds answer
    the same questions."""
    cu = tmp_path / "vadd.cu"
    tmp_path.mkdir(parents=True, exist_ok=True)
    cu.write_text(with_behaviour("slow"))
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    spec = loaded.specs[0]
    evaluator = GpuEvaluator(
        sessions[0],
        str(cu),
        spec,
        CompileOptions(),
        None,
        loaded,
        own_session=True,
        more_sessions=sessions[1:],
    )
    proposals = [
        Proposal("scripted", with_behaviour(b, extra), note=b)
        for b, extra in [
            ("const", ""),
            ("crash", ""),
            ("vadd", ""),
            ("slow", "x"),
            ("vadd", ""),
            ("half", ""),
        ]
    ]
    target = Target(str(cu), cu.read_text(), spec, ["vadd"])
    try:
        result = optimize(target, Scripted([proposals]), evaluator, LoopSettings(rounds=1, candidates=6))
        seen = inspect(evaluator.judged_sessions)
    finally:
        evaluator.close()
    return result, seen


def run_round(tmp_path: Path, gpus: int):
    # Warm L2: no speed-of-light bound, which the fake's instant kernel may fall under on a busy CPU.
    timing = TimingSettings(cold_l2=False, budget_s=0.2)
    sessions = [GpuSession(device=d, launch_timeout_s=2.0, timing=timing) for d in range(gpus)]

    def restarts(judged: list[GpuSession]) -> int:
        # A judge starts on its first job: a live one on the last GPU means that GPU worked.
        assert len(judged) == gpus and judged[-1].worker_pid is not None
        return sum(s.restarts for s in judged)

    return scripted_round(sessions, tmp_path, restarts)


def test_a_parallel_round_accepts_what_a_serial_round_accepts(fake_gpus, tmp_path):
    (tmp_path / "serial").mkdir()
    (tmp_path / "parallel").mkdir()
    serial, _ = run_round(tmp_path / "serial", 1)
    parallel, restarts = run_round(tmp_path / "parallel", 2)
    statuses = [(o.id, o.status) for o in parallel.outcomes]
    # In full, one line each: pytest shortens a list in the middle, where the reason was.
    why = "\n".join(
        [f"{o.id} {o.status.label}: {o.message}" for r in (serial, parallel) for o in r.outcomes]
        + [f"verdicts: {serial.verdict} | {parallel.verdict}"]  # a round that stopped says why
    )
    assert (
        statuses
        == [(o.id, o.status) for o in serial.outcomes]
        == [
            ("r1c1", Status.INCORRECT),
            ("r1c2", Status.INCORRECT),  # the crash: its worker died, only this candidate is lost
            ("r1c3", Status.CORRECT),
            ("r1c4", Status.CORRECT),
            ("r1c5", Status.DUPLICATE),
            ("r1c6", Status.INCORRECT),
        ]
    ), why
    assert "crash" in parallel.outcomes[1].message
    assert restarts == 0  # the crash ended the candidate's own process: the judges lived on
    assert serial.accepted is not None and parallel.accepted is not None, (serial.verdict, parallel.verdict)
    assert parallel.accepted.id == serial.accepted.id == "r1c3"


def two_gpu_evaluator(tmp_path: Path):
    """A slow fake vadd with its spec, and the gates over two fake GPUs' sessions."""
    cu = tmp_path / "vadd.cu"
    cu.write_text(with_behaviour("slow"))
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    sessions = [GpuSession(device=d, launch_timeout_s=2.0) for d in range(2)]
    evaluator = GpuEvaluator(
        sessions[0], str(cu), loaded.specs[0], CompileOptions(), None, loaded, True, sessions[1:]
    )
    return cu, loaded, sessions, evaluator


def test_a_cancelled_parallel_round_starts_no_candidate(fake_gpus, tmp_path):
    from kernel_lsp.optimizer.loop import _gates_in_parallel, _State
    from kernel_lsp.optimizer.model import Outcome

    cu, loaded, sessions, evaluator = two_gpu_evaluator(tmp_path)
    target = Target(str(cu), cu.read_text(), loaded.specs[0], ["vadd"])
    proposals = [Proposal("scripted", with_behaviour(b)) for b in ("vadd", "const", "half")]
    state = _State(baseline=Outcome("baseline", 0, "original", Status.CORRECT))
    try:
        assert _gates_in_parallel(proposals, target, evaluator, None, state, lambda: True) == {}
        assert [s.worker_pid for s in sessions] == [None, None]  # no GPU work was started
        ran = _gates_in_parallel(proposals, target, evaluator, None, state, lambda: False)
        assert len(ran) == 3
    finally:
        evaluator.close()


def test_gpus_flag_is_checked_by_both_clis(capsys):
    from kernel_lsp.cli import main

    assert main(["--check", "--gpus", "two", "samples/vector_add"]) == 2
    assert "all` or a number of GPUs, not `two`" in capsys.readouterr().err
    assert main(["optimize", "samples/vector_add/vector_add_fp32.cu", "-k", "vector_add", "--gpus", "0"]) == 2
    assert "not `0`" in capsys.readouterr().err


# --- what a round keeps serial ------------------------------------------------------------------


def test_a_round_compiles_each_text_once_and_never_on_a_borrowed_gpu(fake_gpus, monkeypatch, tmp_path):
    """The GPUs only verify and time: every device compile (a candidate's, and the original's
    that each candidate's reference outputs come from) happens once, before a GPU is lent."""
    import threading
    from collections import Counter

    from kernel_lsp.evaluation.pool import BackendPool

    holding = threading.local()
    compiled: Counter[str] = Counter()
    on_a_borrowed_gpu: list[str] = []
    real_run = BackendPool.run

    def run(self, job):
        def held(member):
            holding.gpu = True
            try:
                return job(member)
            finally:
                holding.gpu = False

        return real_run(self, held)

    def compile_noted(self, source, path, options=None):
        compiled[source] += 1
        if getattr(holding, "gpu", False):
            on_a_borrowed_gpu.append(source)
        return _fake_compile(self, source, path, options)

    monkeypatch.setattr(BackendPool, "run", run)
    monkeypatch.setattr(GpuSession, "compile", compile_noted)
    result, _ = run_round(tmp_path, 2)
    assert [o.status for o in result.outcomes].count(Status.CORRECT) == 2, result.verdict
    # The original and five distinct candidates (the sixth is a duplicate): one compile each.
    assert len(compiled) == 6 and set(compiled.values()) == {1}, compiled.values()
    assert on_a_borrowed_gpu == []


def test_every_gpus_judge_starts_when_the_first_is_asked_for(fake_gpus, tmp_path):
    """The baseline asks for the judges: the second GPU's starts then, beside the first's, not
    inside the parallel round at its first candidate."""
    import time

    *_, evaluator = two_gpu_evaluator(tmp_path)
    try:
        evaluator._sessions(trusted=False)  # what the baseline's check does first
        judged = evaluator.judged_sessions
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(j.backend.worker_pid is None for j in judged):
            time.sleep(0.1)
        assert [j.backend.worker_pid is not None for j in judged] == [True, True]
        assert [j.device_index for j in judged] == [0, 1]
    finally:
        evaluator.close()
    assert all(j.backend.worker_pid is None for j in judged)  # closed with the evaluator


def test_on_one_gpu_the_next_candidate_compiles_while_the_gpu_checks(fake_gpus, monkeypatch, tmp_path):
    """One GPU: the round's gate-1 compiles (real NVRTC) overlap the GPU's checks."""
    import threading
    import time

    from kernel_lsp.optimizer.evaluator import Evaluator

    lock = threading.Lock()
    running = {"compile": 0, "check": 0}
    overlapped: list[bool] = []

    def noted(kind, real):
        def call(self, *args, **kwargs):
            with lock:
                running[kind] += 1
                overlapped.append(running["compile"] > 0 and running["check"] > 0)
            try:
                return real(self, *args, **kwargs)
            finally:
                with lock:
                    running[kind] -= 1

        return call

    monkeypatch.setattr(Evaluator, "compile", noted("compile", Evaluator.compile))
    monkeypatch.setattr(GpuSession, "check", noted("check", GpuSession.check))
    started = time.perf_counter()
    result, _ = run_round(tmp_path, 1)
    assert [o.status for o in result.outcomes].count(Status.CORRECT) == 2, result.verdict
    assert any(overlapped), f"no compile ran beside a check in {time.perf_counter() - started:.1f} s"
