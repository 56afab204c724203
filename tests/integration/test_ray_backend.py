"""The `ray` evaluation backend on a local Ray cluster with two fake GPU resources and the runner's
no-GPU mode: `--check --backend ray --gpus 2` equals local, a parallel optimizer round over two
actors accepts what a serial local round accepts, a killed actor costs only its request and is
replaced, and Ray missing or absent at an address gives one clear message (and a local fallback
only when Ray was not asked for). One cluster for the module: starting Ray takes seconds."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fixture_sources import VADD
from test_multi_gpu import SPEC, scripted_round, spec_d_files, verdicts, with_behaviour

from kernel_lsp.check import FileCheck
from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.evaluation.local import LocalBackend
from kernel_lsp.evaluation.ray_backend import RayBackend
from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.gpu_check import verify_checks
from kernel_lsp.model import TimingSettings
from kernel_lsp.optimizer.model import Status
from kernel_lsp.spec import load_specs
from kernel_lsp.workspace import Workspace

pytestmark = pytest.mark.slow  # the slow tier (starts Ray clusters): python -m pytest -m slow

# CI installs Ray (the test extra); a GPU machine may not have it: skip, never stop collection.
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernel-lsp[ray]')")

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def fake_gpus(cluster, monkeypatch, fake_gpu):
    from test_evaluation import _fake_compile

    monkeypatch.setattr(GpuSession, "compile", _fake_compile)
    return cluster


def test_check_on_ray_equals_local_and_says_where(fake_gpus, tmp_path):
    (tmp_path / "local").mkdir()
    (tmp_path / "ray").mkdir()
    local = [FileCheck(p) for p in spec_d_files(tmp_path / "local")]
    on_ray = [FileCheck(p) for p in spec_d_files(tmp_path / "ray")]
    lines: list[str] = []
    assert verify_checks(
        local, Workspace.fixed(Settings(evaluation_backend="local")), gpus="2", progress=lines.append
    )
    lines.clear()
    device = verify_checks(
        on_ray, Workspace.fixed(Settings(evaluation_backend="ray")), gpus="2", progress=lines.append
    )
    assert device is not None and device.startswith("2 GPUs")
    assert verdicts(on_ray) == verdicts(local)
    assert [s for _, s, _ in verdicts(on_ray)] == ["ok", "failed", "failed", "ok", "ok"]
    crash = on_ray[2].gpu_checks[0]
    assert crash.problems[0].kind == "crash"  # the worker inside the actor died, not the actor
    # Every result carries the host and the GPU (Ray's id) it ran on; both actors did work.
    checks = [k for c in on_ray for k in c.gpu_checks]
    assert {k.host for k in checks} == {HOST}
    assert {k.device_index for k in checks} == {0, 1}
    assert len(lines) == 5 and all(line.startswith("kernel-lsp: GPU ") for line in lines)


def round_on(sessions: list[GpuSession], tmp_path: Path):
    return scripted_round(sessions, tmp_path)[0]


def test_a_parallel_round_on_two_actors_accepts_what_a_serial_local_round_accepts(fake_gpus, tmp_path):
    # Warm L2: no speed-of-light bound, which the fake's instant kernel may fall under on a busy CPU.
    timing = TimingSettings(cold_l2=False, budget_s=0.2)
    (tmp_path / "serial").mkdir()
    (tmp_path / "ray").mkdir()
    serial = round_on([GpuSession(backend=LocalBackend(0, 2.0, timing))], tmp_path / "serial")
    actors = [RayBackend(2.0, timing) for _ in range(2)]
    parallel = round_on([GpuSession(backend=b) for b in actors], tmp_path / "ray")
    statuses = [(o.id, o.status) for o in parallel.outcomes]
    assert statuses == [(o.id, o.status) for o in serial.outcomes]
    assert statuses[:4] == [
        ("r1c1", Status.INCORRECT),
        ("r1c2", Status.INCORRECT),  # its worker crashed inside the actor; only this candidate lost
        ("r1c3", Status.CORRECT),
        ("r1c4", Status.CORRECT),
    ]
    assert parallel.accepted is not None and serial.accepted is not None
    assert parallel.accepted.id == serial.accepted.id == "r1c3"


# A check that takes seconds on the fake GPU: the timer never reaches its noise target, so it
# samples for its whole budget.
LONG = TimingSettings(cold_l2=False, budget_s=4.0, target_noise=0.0)
SHORT = TimingSettings(cold_l2=False, budget_s=0.2)


def sent_on(backend: RayBackend) -> threading.Event:
    """Set when `backend` sends its next request to its actor."""
    sent = threading.Event()
    real = backend._call

    def call(method: str, *args):
        if method == "check":
            sent.set()
        return real(method, *args)

    backend._call = call  # type: ignore[method-assign]
    return sent


def test_a_busy_actor_still_says_what_it_is(fake_gpus, tmp_path):
    """An actor's device and whether it serves are answered while it checks, as a local GPU's
    device is: the optimizer asks the first GPU's device before every candidate's compile, and
    waiting there for that GPU's check left the other GPU idle (issue 32)."""
    cu = tmp_path / "vadd.cu"
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    backend = RayBackend(30.0, LONG)
    gpu = GpuSession(backend=backend)
    try:
        assert gpu.available, gpu.reason
        sent = sent_on(backend)
        source = with_behaviour("slow")
        result: list = []
        checking = threading.Thread(
            target=lambda: result.append(
                gpu.check(
                    GpuCheckRequest(
                        source, str(cu), kernel="vadd", spec=loaded, artifact=gpu.compile(source, str(cu))
                    )
                )
            )
        )
        checking.start()
        assert sent.wait(60)
        device, available = backend.device, backend.available
        assert checking.is_alive(), "the answer waited for the check"
        assert device is not None and available
        checking.join(120)
        assert result and result[0].ok, result[0].message if result else "no result"
        assert result[0].device_index == backend.device_index
    finally:
        gpu.close()


def test_a_candidate_goes_to_the_free_actor_while_the_other_checks(fake_gpus, tmp_path):
    """Two actors, one busy with a long check: the next candidate is compiled and checked on the
    other at once, and is done before the first (before: it waited for the first actor, whose
    device its compile asked for, and ran after it)."""
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.optimizer.evaluator import GpuEvaluator

    cu = tmp_path / "vadd.cu"
    original = with_behaviour("slow")
    cu.write_text(original)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    busy, free = RayBackend(30.0, LONG), RayBackend(30.0, SHORT)
    sessions = [GpuSession(backend=busy), GpuSession(backend=free)]
    assert all(s.available for s in sessions)
    evaluator = GpuEvaluator(
        sessions[0], str(cu), loaded.specs[0], CompileOptions(), None, loaded, True, sessions[1:]
    )
    sent = sent_on(busy)
    first: list = []
    # Whether the first check was still running each time the free actor was sent a check: the
    # second candidate's request left at once (whenever its check then ends: on a loaded CI
    # machine it ended after the busy actor's 4 s of timing).
    first_running_when_sent: list[bool] = []
    real_call = free._call

    def call(method: str, *args):
        if method == "check":
            first_running_when_sent.append(long_check.is_alive())
        return real_call(method, *args)

    free._call = call  # type: ignore[method-assign]
    busy_call = busy._call
    to_busy: list[str] = []
    busy._call = lambda method, *args: (to_busy.append(method), busy_call(method, *args))[1]  # type: ignore[method-assign]
    try:
        # The pool lends its first member (the busy actor) to the first job.
        long_check = threading.Thread(
            target=lambda: first.append(evaluator.check(with_behaviour("vadd"), original, trusted=True))
        )
        long_check.start()
        assert sent.wait(60)
        checks_on_busy = to_busy.count("check")
        second = evaluator.check(with_behaviour("vadd", "x"), original, trusted=True)
        assert first_running_when_sent and all(first_running_when_sent), (
            "the second candidate waited for the busy actor"
        )
        assert to_busy.count("check") == checks_on_busy, "the second candidate went to the busy actor"
        assert second.ok, second.problems
        long_check.join(120)
        assert first and first[0].ok, first[0].problems if first else "no result"
    finally:
        evaluator.close()


def test_a_killed_actor_costs_only_its_request_and_is_replaced(fake_gpus, tmp_path):
    cu = tmp_path / "vadd.cu"
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    loaded = load_specs(str(tmp_path / "vadd.spec.py"))
    timing = TimingSettings(cold_l2=False, budget_s=0.1)
    doomed, other = RayBackend(120.0, timing), RayBackend(120.0, timing)
    gpu_doomed, gpu_other = GpuSession(backend=doomed), GpuSession(backend=other)
    assert gpu_doomed.available and gpu_other.available
    first_actor = doomed.actor

    def check(gpu: GpuSession, behaviour: str):
        source = with_behaviour(behaviour)
        built = gpu.compile(source, str(cu))
        return gpu.check(GpuCheckRequest(source, str(cu), kernel="vadd", spec=loaded, artifact=built))

    result: list = []
    # A kernel that never returns (launch timeout 120 s): the actor is mid-request when killed.
    hung = threading.Thread(target=lambda: result.append(check(gpu_doomed, "hang")))
    hung.start()
    time.sleep(3.0)
    ray.kill(first_actor)
    hung.join(timeout=60)
    assert not hung.is_alive()
    lost = result[0]
    assert not lost.ok and lost.problems[0].kind == "crash"
    assert "Ray actor" in lost.message and "replaced" in lost.message
    # The other actor never noticed; the replacement serves the next request.
    assert check(gpu_other, "vadd").ok
    again = check(gpu_doomed, "vadd")
    assert again.ok, again.message
    assert doomed.actor is not first_actor and doomed.restarts >= 1
    # An actor that dies between requests is replaced before the next one, which loses nothing.
    ray.kill(other.actor)
    time.sleep(1.0)
    assert check(gpu_other, "vadd").ok and other.restarts >= 1
    gpu_doomed.close()
    gpu_other.close()


def test_actors_only_on_free_gpus_and_a_clear_error_when_none_is_free(cluster):
    """A GPU another actor holds (another editor's kernel-lsp, a training job) gets no actor:
    one placed there would wait as long as the other holds it."""
    from kernel_lsp.evaluation.ray_backend import RayUnavailable, open_ray_backends

    @ray.remote(num_gpus=1)
    class Holder:
        def ready(self) -> bool:
            return True

    def settle(free: int) -> None:  # Ray's count of free resources lags behind placements
        deadline = time.monotonic() + 30
        while ray.available_resources().get("GPU", 0) != free and time.monotonic() < deadline:
            time.sleep(0.1)

    holders = [Holder.remote()]
    ray.get(holders[0].ready.remote(), timeout=60)
    settle(1)
    lines: list[str] = []
    t0 = time.monotonic()
    backends = open_ray_backends(None, fake=True, log=lines.append)
    assert len(backends) == 1 and "1 held by other work; using 1, not 2" in lines[0], lines
    assert backends[0].available, backends[0].reason
    holders.append(Holder.remote())  # the first is held by the backend: this one waits for it
    for b in backends:
        b.close()
    ray.get(holders[1].ready.remote(), timeout=60)
    settle(0)
    with pytest.raises(
        RayUnavailable, match=r"all 2 GPU\(s\) of the Ray cluster .* are held by other actors"
    ):
        open_ray_backends(1, fake=True, log=lines.append)
    assert time.monotonic() - t0 < 60  # said, not waited out
    for h in holders:
        ray.kill(h)


def test_ray_backend_setting_and_flags():
    settings, problems = settings_from_dict(
        {"evaluation": {"backend": "ray"}, "cluster": {"address": "h:6379"}}
    )
    assert (settings.evaluation_backend, settings.cluster_address, problems) == ("ray", "h:6379", [])
    settings, problems = settings_from_dict({"kernelLsp.evaluation.backend": "slurm"})
    assert settings.evaluation_backend == "auto" and "evaluation.backend" in problems[0]
    # optimize's flags override the settings, as --check's and bench's do (same helper).
    from kernel_lsp.cli.optimize import _engine, parser

    args = parser().parse_args(["k.cu", "-k", "k", "--backend", "ray", "--ray-address", "head:6379"])
    settings = _engine("/nonexistent/k.cu", args).settings_for("/nonexistent/k.cu")
    assert (settings.evaluation_backend, settings.cluster_address) == ("ray", "head:6379")


# --- messages: Ray missing, no cluster at the address (fresh processes: no cluster joined) -----

BLOCK_RAY = "import sys; sys.modules['ray'] = None\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


OPEN = """
from kernel_lsp.evaluation.choose import RayUnavailable, open_backends
lines = []
try:
    backends = open_backends({kind!r}, "2", address={address!r}, log=lines.append)
    print("OPENED", [type(b).__name__ for b in backends])
except RayUnavailable as e:
    print("ERROR", e)
print("LOG", lines)
"""


def test_ray_asked_for_but_not_installed_is_one_clear_error():
    out = _run(BLOCK_RAY + OPEN.format(kind="ray", address=None)).stdout
    assert "ERROR" in out and "not installed" in out and 'pip install "kernel-lsp[ray]"' in out
    assert "OPENED" not in out


def test_no_cluster_at_the_address_falls_back_only_when_ray_was_not_asked_for():
    # Nothing listens on a port that was just free.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    explicit = _run(OPEN.format(kind="ray", address=address)).stdout
    assert f"ERROR no Ray cluster at {address}" in explicit and "OPENED" not in explicit
    implicit = _run(OPEN.format(kind="auto", address=address)).stdout
    assert "OPENED ['LocalBackend', 'LocalBackend']" in implicit
    assert f"no Ray cluster at {address}" in implicit and "(`local`) instead" in implicit


def test_check_cli_with_ray_and_no_ray_installed_exits_2_with_the_message(tmp_path):
    # Without a GPU here --check verifies only through a cluster: --backend ray must say why not.
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    code = BLOCK_RAY + (
        "from kernel_lsp.cli import main\n"
        f"raise SystemExit(main(['--check', {str(tmp_path / 'vadd.cu')!r}, '--backend', 'ray', '-j', '1']))"
    )
    run = _run(code)
    assert run.returncode == 2, run.stderr
    assert "not installed" in run.stderr and "kernel-lsp[ray]" in run.stderr


def test_open_backends_local_needs_no_ray():
    code = BLOCK_RAY + OPEN.format(kind="local", address=None)
    assert "OPENED ['LocalBackend', 'LocalBackend']" in _run(code).stdout
