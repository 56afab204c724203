"""The input sets of a judged timing case (runner/judged_sets.py) on the fake GPU, without
processes: no input reaches a side's buffers before the judge prepares the request that times
it, the two sides never share a buffer, batches move to groups of sets new to them at their
2nd and 4th measured request, and each side's timed outputs are checked against the
references of the inputs it was given."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.judged_sets import GROUPS, JudgedSets, judged_batch_most
from kernel_lsp.runner.verify import Failed
from kernel_lsp.spec import In, InOut, Out, Scalar, Spec

SIZES = {"n": 64}


def _spec() -> Spec:
    return Spec(
        kernel="k",
        sizes=[SIZES],
        args={"a": In("float32"), "x": InOut("float32"), "c": Out("float32"), "n": Scalar("int32")},
        reference=lambda a, x: {"c": a, "x": x + a},
    )


@pytest.fixture
def sets():
    made = JudgedSets(FakeDevice(), _spec(), SIZES, 1234, sides=2, batch=3, most=8)
    yield made
    made.free()


def test_no_input_is_in_a_sides_buffers_before_its_request_is_prepared(sets):
    assert len(sets.inputs) == GROUPS * 3 and len(sets.buffers[0]) == len(sets.buffers[1]) == 3
    for side in sets.buffers:
        for bufs in side:
            assert not bufs.read("a").any() and not bufs.read("x").any()  # nothing written yet
    sets.prepare_side(0)
    for k, bufs in enumerate(sets.buffers[0]):
        np.testing.assert_array_equal(bufs.read("a"), sets.inputs[k]["a"])
        np.testing.assert_array_equal(bufs.read("x"), sets.inputs[k]["x"])
        c = bufs.read("c").view(np.uint8)
        assert np.all(c == c[0])  # the whole output holds this request's poison
    assert not any(b.read("a").any() for b in sets.buffers[1])  # the other side's: untouched


def test_the_two_sides_never_share_a_buffer(sets):
    first = {base for bufs in sets.buffers[0] for base in bufs.bases}
    second = {base for bufs in sets.buffers[1] for base in bufs.bases}
    assert first and second and not first & second


def test_what_a_run_did_to_its_inputs_is_undone_before_the_next_request(sets):
    sets.stop_warming()
    sets.prepare_side(1)
    bufs = sets.buffers[1][0]
    bufs.upload("a", np.full(64, 1e-40, np.float32))  # denormals, as a saboteur writes them
    bufs.upload("x", np.zeros(64, np.float32))  # what a run does to an InOut
    sets.prepare_side(1, again=True)
    np.testing.assert_array_equal(bufs.read("a"), sets.inputs[0]["a"])
    np.testing.assert_array_equal(bufs.read("x"), sets.inputs[0]["x"])


def test_measured_batches_move_to_groups_new_to_them(sets):
    sets.prepare_side(0)  # warming up: group 0, not counted
    sets.stop_warming()
    new = []
    for _ in range(6):
        sets.prepare_side(0)
        new.append(sets.new_to(0))
        sets.prepare_side(0, again=True)  # the stand-in's request: the same group
        assert sets.new_to(0) == new[-1]
    assert new == [False, True, False, True, False, False]
    np.testing.assert_array_equal(sets.buffers[0][0].read("a"), sets.inputs[2 * 3]["a"])  # group 2


def test_each_sides_timed_outputs_are_checked_against_its_inputs(sets):
    sets.stop_warming()
    for side in (0, 1):
        sets.prepare_side(side)
    for k, bufs in enumerate(sets.buffers[1]):  # side 1 does its work; side 0 leaves the poison
        bufs.upload("c", sets.inputs[k]["a"])
        bufs.upload("x", sets.inputs[k]["x"] + sets.inputs[k]["a"])
    sets.check_outputs(1, "n=64", lambda *a: None)
    with pytest.raises(Failed) as e:
        sets.check_outputs(0, "n=64", lambda *a: None)
    assert e.value.problem.kind == "timing_mismatch"
    assert "outputs of the timed launches are wrong" in e.value.problem.message


def test_a_batch_grows_as_far_as_memory_allows():
    spec = _spec()
    case = 4 * 64 * 3  # a, x, c
    inputs = 4 * 64 * 2  # a, x
    per_run = 2 * 2 * case + GROUPS * inputs
    assert judged_batch_most(spec, SIZES, 2, device_bytes=4 * 10 * per_run, host_bytes=0) == 10
    assert judged_batch_most(spec, SIZES, 2, device_bytes=1, host_bytes=0) == 1
    made = JudgedSets(FakeDevice(), spec, SIZES, 1, sides=1, batch=3, most=5)
    try:
        assert made.grow(16) == 5 and len(made.buffers[0]) == 5 and len(made.inputs) == GROUPS * 5
    finally:
        made.free()


def test_some_of_a_sides_sets_are_checked_when_asked(sets):
    sets.stop_warming()
    sets.prepare_side(0)
    bufs = sets.buffers[0]
    for k in range(3):  # right outputs on every set but the last
        if k < 2:
            bufs[k].upload("c", sets.inputs[k]["a"])
            bufs[k].upload("x", sets.inputs[k]["x"] + sets.inputs[k]["a"])
    failed = 0
    for _ in range(30):  # two of three sets checked: the wrong one is missed now and then
        try:
            sets.check_outputs(0, "n=64", lambda *a: None, most=2)
        except Failed:
            failed += 1
    assert 0 < failed < 30
    with pytest.raises(Failed):
        sets.check_outputs(0, "n=64", lambda *a: None)
