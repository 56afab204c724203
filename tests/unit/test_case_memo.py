"""A judge worker's memo of inputs and references (runner/case_memo.py), and the chunked
comparison (runner/verify.all_close): both must give exactly what they replace."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kernel_lsp.runner import case_memo, verify
from kernel_lsp.spec import load_specs, make_inputs, run_reference

SPEC = textwrap.dedent(
    """\
    from kernel_lsp.spec import In, Out, Scalar, Spec
    SPEC = Spec(
        kernel="vadd",
        sizes=[{"n": 1000}],
        args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
        reference=lambda a, b: {"c": a + b},
    )
    """
)


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "vadd.spec.py"
    path.write_text(SPEC)
    return path


def load(path, source=None):
    return load_specs(str(path), source).specs[0]


def test_a_memo_gives_the_arrays_it_replaces_and_makes_them_once(spec_file):
    memo = case_memo.CaseMemo(1 << 30)
    sizes = {"n": 1000}
    for _request in range(3):  # three requests of one run: the spec loaded again each time
        spec = load(spec_file, SPEC)
        memo.begin_request(spec, {"path": str(spec_file), "source": SPEC, "kernel": "vadd"})
        inputs = memo.inputs(spec, sizes, 11, 1)
        reference = memo.reference(spec, sizes, 11, 1, inputs)
        fresh = make_inputs(spec, sizes, 11, 1)
        assert inputs.keys() == fresh.keys() and all(np.array_equal(inputs[k], fresh[k]) for k in fresh)
        assert np.array_equal(reference["c"], run_reference(spec, sizes, fresh)["c"])
    assert (memo.misses, memo.hits) == (2, 4)
    with pytest.raises(ValueError, match="read-only"):
        inputs["a"][0] = 1.0  # a caller that would change them fails, not the next request


def test_another_spec_text_or_a_changed_spec_file_is_not_served_from_the_memo(spec_file):
    memo = case_memo.CaseMemo(1 << 30)
    sizes = {"n": 1000}
    spec = load(spec_file)
    memo.begin_request(spec, {"path": str(spec_file), "kernel": "vadd"})  # read from its file
    memo.inputs(spec, sizes, 11, 0)
    edited = SPEC.replace('In("float32"), "b"', 'In("float32", dist="uniform(5, 6)"), "b"')
    spec_file.write_text(edited)
    spec = load(spec_file)
    memo.begin_request(spec, {"path": str(spec_file), "kernel": "vadd"})
    assert memo.inputs(spec, sizes, 11, 0)["a"].min() >= 5.0  # the edited file's inputs
    spec = load(spec_file, SPEC)
    memo.begin_request(spec, {"path": str(spec_file), "source": SPEC, "kernel": "vadd"})
    assert memo.inputs(spec, sizes, 11, 0)["a"].min() < 5.0
    other = load(spec_file, SPEC)  # not the request's spec object: made, not kept
    memo.inputs(other, sizes, 11, 0)
    assert (memo.misses, memo.hits) == (3, 0)


def test_the_memo_keeps_to_its_budget_and_a_scan_longer_than_it_still_hits(spec_file):
    """A judged batch asks for its sets in order, each timing again: kept least recently used
    first out, six sets through a memo of four would never hit; kept as they came, four do."""
    spec = load(spec_file, SPEC)
    one = 2 * 4 * 1000  # two float32 inputs of 1000
    memo = case_memo.CaseMemo(4 * one)
    memo.begin_request(spec, {"source": SPEC})
    for _ in range(2):
        for seed in range(6):
            memo.inputs(spec, {"n": 1000}, seed, 0)
    assert memo._bytes <= memo.max_bytes
    assert (memo.hits, memo.misses) == (4, 8)
    # Another spec's request: the earlier spec's arrays make room for its own, as much as needed.
    other = SPEC.replace("a + b", "a - b")
    spec2 = load(spec_file, other)
    memo.begin_request(spec2, {"source": other})
    for seed in range(3):
        memo.inputs(spec2, {"n": 1000}, seed, 0)
    assert memo._bytes <= memo.max_bytes
    kept = [k[1] for k in memo._items]
    assert kept.count(memo._spec_keys[id(spec2)]) == 3 and len(kept) == 4
    big = case_memo.CaseMemo(one)  # a set over a quarter of the budget is never kept
    big.begin_request(spec, {"source": SPEC})
    big.inputs(spec, {"n": 1000}, 0, 0)
    assert not big._items


def test_without_a_memo_the_module_functions_make_afresh(spec_file, monkeypatch):
    monkeypatch.setattr(case_memo, "ACTIVE", None)
    spec = load(spec_file, SPEC)
    a = case_memo.inputs(spec, {"n": 1000}, 3, 0)
    assert a["a"].flags.writeable  # not kept, so not frozen
    assert np.array_equal(case_memo.reference(spec, {"n": 1000}, 3, 0, a)["c"], a["a"] + a["b"])


def slow_verdict(got, expected, atol, rtol) -> bool:
    """compare_output's rule, whole-array in float64, as it was written before the chunks."""
    g, e = got.astype(np.float64).reshape(-1), expected.astype(np.float64).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~(np.abs(g - e) <= atol + rtol * np.abs(e))
    bad &= ~(np.isnan(g) & np.isnan(e))
    return not bad.any()


@pytest.mark.parametrize("n", [1, 1000, 3 * verify._CHUNK + 17])
def test_the_chunked_comparison_agrees_with_the_whole_array_one(n):
    rng = np.random.default_rng(n)
    expected = rng.standard_normal(n).astype(np.float32)
    cases = [expected.copy()]
    for value in (np.nan, np.inf, -np.inf, 1e30):
        bad = expected.copy()
        bad[-1] = value
        cases.append(bad)
    near = expected + np.float32(1e-5) * (1 + np.abs(expected))  # at the tolerance's edge
    cases.append(near.astype(np.float32))
    nan_both = expected.copy()
    nan_both[n // 2] = np.nan
    for got in cases:
        for exp in (expected, nan_both if got is not nan_both else expected):
            want = slow_verdict(got, exp, 1e-5, 1e-5)
            assert verify.all_close(got, exp, 1e-5, 1e-5) == want
    assert verify.all_close(nan_both, nan_both, 1e-5, 1e-5)  # NaN where NaN is expected
    if n > 1:
        assert not verify.all_close(cases[1], expected, 1e-5, 1e-5)  # a NaN where a value is due
