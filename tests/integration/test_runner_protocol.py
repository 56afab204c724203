"""The worker protocol, restarts and timeouts, with the worker in its no-GPU (fake) mode."""

from __future__ import annotations

import io
import textwrap

import pytest

from kernel_lsp.gpu import GpuCheckRequest, GpuSession
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.runner.protocol import ProtocolError, read_message, write_message
from kernel_lsp.spec import load_specs

SPEC = textwrap.dedent(
    """\
    from kernel_lsp.spec import In, Out, Scalar, Spec
    print("a spec that prints must not corrupt the protocol")
    SPEC = Spec(
        kernel="vadd",
        sizes=[{"n": 1}, {"n": 1000}],
        timing_sizes=[{"n": 4096}],
        args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
        reference=lambda a, b: {"c": a + b},
    )
    """
)
STEPS = [
    {
        "kernel": "vadd",
        "symbol": "k",
        "params": ["a", "b", "c", "n"],
        "grid": "cdiv(n, 256)",
        "block": "256",
        "smem": "0",
    }
]


def test_frames_round_trip_with_blobs():
    buf = io.BytesIO()
    write_message(buf, {"op": "check", "x": [1, 2]}, [b"\x00cubin", b""])
    write_message(buf, {"op": "hello"})
    buf.seek(0)
    assert read_message(buf) == ({"op": "check", "x": [1, 2]}, [b"\x00cubin", b""])
    assert read_message(buf) == ({"op": "hello"}, [])
    with pytest.raises(EOFError):
        read_message(buf)
    with pytest.raises(ProtocolError):
        read_message(io.BytesIO(b"JUNK\x00\x00\x00\x00"))


@pytest.fixture(scope="module")
def session():
    with GpuSession(fake=True, launch_timeout_s=1.5) as s:
        yield s


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


def run(session, spec, behaviour):
    return session.check_compiled(fake_cubin({"k": behaviour}), STEPS, spec)


def test_fake_device_answers(session):
    assert session.available and session.reason == ""
    assert session.device.name.startswith("Fake") and session.device.copy_bandwidth_Bps > 0


def test_correct_kernel_passes_and_is_timed(session, spec):
    r = run(session, spec, "vadd")
    assert r.ok, r.message
    assert [c["case"] for c in r.cases] == ["n=1", "n=1000", "n=97"]
    (t,) = r.timings
    assert t.case == "n=4096" and t.measurement.n >= 15


@pytest.mark.parametrize(
    "behaviour, kind, words",
    [
        ("noop", "mismatch", "still hold the poison"),
        ("const", "mismatch", "elements wrong, first at index 0"),
        ("half", "mismatch", "case n=1: `c`: 1 of 1 elements wrong"),
        ("oob", "guard", "wrote past its end"),
        ("clobber", "input_modified", "input `a` was modified"),
        ("flaky", "mismatch", "elements wrong"),
        ("crash", "crash", "illegal memory access in case n=1"),
    ],
)
def test_cheats_rejected(session, spec, behaviour, kind, words):
    r = run(session, spec, behaviour)
    assert not r.ok and r.problems[0].kind == kind, r.message
    assert words in r.message, r.message
    assert run(session, spec, "vadd").ok  # the session answers afterwards


def test_hang_times_out_and_worker_restarts(session, spec):
    before = session.worker_pid
    r = run(session, spec, "hang")
    assert r.problems[0].kind == "timeout"
    assert r.message == "kernel timed out after 1.5 s in case n=1 (verify), twice"
    again = run(session, spec, "vadd")
    assert again.ok and session.worker_pid != before


def test_a_launch_that_outlived_its_timeout_once_is_checked_again(spec, tmp_path):
    """A launch that waited on a GPU another process's fault stalled is no hang: checked once more
    in a fresh worker, it passes."""
    mark = tmp_path / "stalled"
    with GpuSession(fake=True, launch_timeout_s=1.5) as s:
        first = s.worker_pid
        r = run(s, spec, f"stall:{mark}")
        assert r.ok, r.message
        assert mark.exists() and s.worker_pid != first  # it did stall, and a new worker ran it


def test_an_ab_that_outlived_its_timeout_once_is_timed_again(spec, tmp_path):
    """The same for an A/B: a stall is no error; a hang is, said as twice."""
    fast = (fake_cubin({"k": "vadd"}), STEPS)
    with GpuSession(fake=True, launch_timeout_s=1.5) as s:
        stall = fake_cubin({"k": f"stall:{tmp_path / 'stalled'}"})
        stalled = s.compare_compiled(fast, (stall, STEPS), spec)
        assert stalled.error is None and stalled.n > 0, stalled
        assert (tmp_path / "stalled").exists()
        hung = s.compare_compiled(fast, (fake_cubin({"k": "hang"}), STEPS), spec)
        assert hung.error is not None and hung.error.endswith(", twice"), hung


def test_compare_interleaved(session, spec):
    slow = (fake_cubin({"k": "slow"}), STEPS)
    fast = (fake_cubin({"k": "vadd"}), STEPS)
    c = session.compare_compiled(slow, fast, spec)
    assert c.error is None and c.faster and c.ci_low > 2, c
    same = session.compare_compiled(fast, fast, spec)
    assert not same.faster or same.ci_low > 1.02


def test_unavailable_without_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    s = GpuSession(fake=False)
    assert not s.available and "CUDA_VISIBLE_DEVICES" in s.reason
    check = s.check(GpuCheckRequest("__global__ void k() {}", "k.cu", kernel="k"))
    assert check.status == "unavailable" and "no GPU" in check.message


def test_an_abandoned_request_leaves_no_answer_for_the_next(session, spec):
    """A caller interrupted while it waits (Ctrl-C, a test's timeout) must not leave the worker's
    late answer queued: the next request, a compare, would read a check's reply as its own."""

    def interrupt(phase: str, case: str) -> None:
        raise KeyboardInterrupt

    fast = (fake_cubin({"k": "vadd"}), STEPS)
    with pytest.raises(KeyboardInterrupt):
        session.backend.check(spec, None, fast, True, None, interrupt)
    c = session.compare_compiled((fake_cubin({"k": "slow"}), STEPS), fast, spec)
    assert c.error is None and c.faster, c


@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_the_fake_gpus_judge_times_the_accuseds_cpu_not_a_stretched_wall_clock(
    spec, mechanism, monkeypatch, tmp_path
):
    """The fake GPU's kernels are host code, and a loaded machine stretches their wall time at
    random: with seven processes on two cores an honest 2 ms kernel against an instant one read
    0.8x to 10x, and rounds that should offer it did not. Its judge counts the accused's CPU time
    (judge.AccusedProcess.cpu_seconds). Here the judge's processes are stopped for 10 ms of every
    11 (a scheduler's doing, exaggerated) all through an A/B: the ratio is still the kernels'
    (12-17x here; timed on the wall clock, 7.6x [0.57, 39.8], not offered)."""
    import signal
    import threading
    import time

    from kernel_lsp import procs
    from kernel_lsp.fence.sandbox import bwrap_available

    if mechanism == "bwrap" and (why := bwrap_available(str(tmp_path))):
        pytest.skip(why)
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
    slow, fast = (fake_cubin({"k": "slow"}), STEPS), (fake_cubin({"k": "vadd"}), STEPS)
    with GpuSession(fake=True, sandboxed=True, launch_timeout_s=10.0) as s:
        assert s.compare_compiled(slow, fast, spec).error is None  # the judge and its processes are up
        done = threading.Event()

        def stretch() -> None:
            while not done.is_set():
                below = procs.descendants(s.worker_pid or 0)[1:]  # the judge's processes
                procs.signal_all(below, signal.SIGSTOP)
                time.sleep(0.010)
                procs.signal_all(below, signal.SIGCONT)
                time.sleep(0.001)

        stretcher = threading.Thread(target=stretch, daemon=True)
        stretcher.start()
        try:
            c = s.compare_compiled(slow, fast, spec)
        finally:
            done.set()
            stretcher.join()
            procs.signal_all(procs.descendants(s.worker_pid or 0), signal.SIGCONT)
        assert c.error is None and c.faster and c.ci_low > 5, c


def test_an_ab_read_as_a_speed_up_is_timed_again_in_fresh_pairs(spec):
    """A judge's A/B that reads as a speed-up is timed `judged_pairs` times in all (in a judge, each
    in two processes taken fresh: the same kernel in two processes differs by a constant that
    one timing's interval does not hold) and judged on all of them; one that reads as no
    speed-up is not timed again."""
    from kernel_lsp.evaluation.local import LocalBackend

    slow, fast = (fake_cubin({"k": "slow"}), STEPS), (fake_cubin({"k": "vadd"}), STEPS)
    with GpuSession(backend=LocalBackend(fake=True, launch_timeout_s=1.5, judged_pairs=3)) as s:
        faster = s.compare_compiled(slow, fast, spec)
        assert faster.error is None and faster.faster and faster.pairs == 3, faster
        assert faster.ci_low <= faster.speedup <= faster.ci_high and faster.ci_low > 2, faster
        slower = s.compare_compiled(fast, slow, spec)
        assert not slower.faster and slower.pairs == 1 and slower.speedup < 1, slower
