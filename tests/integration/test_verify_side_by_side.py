"""A large case's runs get their inputs and references made side by side in threads
(runner/verify._prepare_runs): the same arrays as one run after another, a run whose reference
raised raises only when it is taken (run 0's verdict first), and on the fake GPU a large case
verifies."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kernel_lsp.gpu import GpuSession
from kernel_lsp.runner import case_memo, verify
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.spec import load_specs, make_inputs
from kernel_lsp.spec.inputs import VERIFY_SEED

N = 1 << 21  # 3 float32 buffers of 8 MiB: 48 MiB for 2 runs, made side by side
SPEC = textwrap.dedent(
    f"""\
    from kernel_lsp.spec import In, Out, Scalar, Spec
    SPEC = Spec(
        kernel="vadd",
        sizes=[{{"n": 1000}}, {{"n": {N}}}],
        args={{"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")}},
        reference=lambda a, b: {{"c": a + b}},
    )
    """
)


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


def made(prepared) -> list[tuple[dict, dict]]:
    return [p() for p in prepared]


def test_side_by_side_runs_are_the_serial_runs(spec):
    sizes, case_bytes = {"n": N}, 3 * 4 * N
    threaded = verify._prepare_runs(spec, sizes, 3, False, case_bytes)
    assert [p._future is not None for p in threaded] == [False, True, True]
    serial = verify._prepare_runs(spec, sizes, 3, False, 1024)  # a small case: one after another
    assert all(p._future is None for p in serial)
    for (ti, tr), (si, sr) in zip(made(threaded), made(serial), strict=True):
        assert ti.keys() == si.keys() and tr.keys() == sr.keys() == {"c"}
        assert all(np.array_equal(ti[k], si[k]) for k in ti)
        assert np.array_equal(tr["c"], sr["c"])
    inputs, reference = made(threaded)[1]
    assert np.array_equal(reference["c"], inputs["a"] + inputs["b"])


def test_a_run_that_raised_raises_when_taken(spec, monkeypatch):
    sizes = {"n": N}
    second = make_inputs(spec, sizes, VERIFY_SEED + spec.seed, 1)["a"][0]
    real = case_memo.run_reference

    def fails_on_run_1(spec_, sizes_, inputs):
        if inputs["a"][0] == second:
            raise ValueError("the reference failed on run 1")
        return real(spec_, sizes_, inputs)

    monkeypatch.setattr(case_memo, "run_reference", fails_on_run_1)
    prepared = verify._prepare_runs(spec, sizes, 2, False, 3 * 4 * N)
    inputs, _ = prepared[0]()  # run 0 is unaffected
    assert inputs["a"][0] != second
    with pytest.raises(ValueError, match="run 1"):
        prepared[1]()


def test_a_large_case_verifies_on_the_fake_gpu(spec):
    steps = [{"kernel": "vadd", "symbol": "vadd", "params": ["a", "b", "c", "n"], "grid": [1, 1, 1]}]
    steps[0].update(block=[256, 1, 1], smem=0)
    with GpuSession(launch_timeout_s=30.0, fake=True) as gpu:
        check = gpu.check_compiled(fake_cubin({"vadd": "vadd"}), steps, spec, measure=False)
    assert check.ok, check.message
    assert {"case": f"n={N}", "ok": True} in check.cases  # its 2 runs were made side by side


def test_timed_sets_of_a_large_case_are_the_serial_ones(spec, monkeypatch):
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.isolation import TimedSets

    device, sizes = FakeDevice(), {"n": N}

    def inputs_of(count: int) -> list[dict]:
        sets = TimedSets(device, spec, sizes, 11, lambda: None, count)
        try:
            return [s.inputs for s in sets.sets]
        finally:
            sets.free()

    threads: list[str] = []
    real = verify.side_by_side

    def noted(makers, each_bytes, **how):
        prepared = real(makers, each_bytes, **how)
        threads.append("threads" if any(p._future is not None for p in prepared) else "serial")
        return prepared

    monkeypatch.setattr("kernel_lsp.runner.isolation.side_by_side", noted)
    threaded = inputs_of(3)
    monkeypatch.setattr(verify, "SIDE_BY_SIDE_BYTES", 1 << 62)
    serial = inputs_of(3)
    assert threads == ["threads", "serial"]
    assert len(threaded) == len(serial) == 3
    for t, s in zip(threaded, serial, strict=True):
        assert all(np.array_equal(t[k], s[k]) for k in ("a", "b"))
    assert not np.array_equal(threaded[0]["a"], threaded[1]["a"])  # each set its own seed


def test_timed_sets_are_made_side_by_side_past_the_limit_for_runs(spec, monkeypatch):
    """A case's verification runs are made one by one past SIDE_BY_SIDE_MAX_BYTES (each is let go
    once checked); timed sets are all kept until the timing ends, so they are made side by side."""
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.isolation import TimedSets

    monkeypatch.setattr(verify, "SIDE_BY_SIDE_MAX_BYTES", verify.SIDE_BY_SIDE_BYTES)
    sizes, case_bytes = {"n": N}, 3 * 4 * N  # 24 MiB a set, over the limit with two
    assert all(p._future is None for p in verify._prepare_runs(spec, sizes, 3, False, case_bytes))
    made_in: list[str] = []
    real = case_memo.inputs

    def noted(*args):
        import threading

        made_in.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(case_memo, "inputs", noted)
    sets = TimedSets(FakeDevice(), spec, sizes, 11, lambda: None, 3)
    sets.free()
    assert len(made_in) == 3 and sum(t.startswith("kernel-lsp-inputs") for t in made_in) == 2


def test_side_by_side_uses_the_host_cpus_share_of_threads(monkeypatch):
    """As many threads at once as this process's CPUs over the workers on its GPU (lanes)."""
    import os
    import threading

    def run(lanes: int) -> set[str]:
        monkeypatch.setenv("KERNEL_LSP_GPU_LANES", str(lanes))
        names: set[str] = set()
        lock = threading.Lock()

        def make() -> int:
            with lock:
                names.add(threading.current_thread().name)
            return 1

        prepared = verify.side_by_side([make] * 9, verify.SIDE_BY_SIDE_BYTES, all_kept=True)
        assert [p() for p in prepared] == [1] * 9
        return {n for n in names if n.startswith("kernel-lsp-inputs")}

    cpus = len(os.sched_getaffinity(0))
    assert verify.host_threads() == cpus
    assert len(run(cpus * 4)) == 1  # one CPU's share: one thread beside the caller's
    assert 1 <= len(run(1)) <= min(8, cpus)
