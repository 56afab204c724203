"""Output comparison: what a mismatch message names."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from kernel_lsp.runner.verify import compare_output


def test_match_within_tolerance():
    ref = np.linspace(-1, 1, 100, dtype=np.float32)
    assert compare_output("c", ref + 1e-7, ref, 1e-6, 1e-6) is None


def test_mismatch_names_index_errors_and_count():
    ref = np.zeros(1000, np.float32)
    got = ref.copy()
    got[17] = 0.5
    got[900] = -2.0
    msg = compare_output("c", got, ref, 1e-6, 1e-6)
    assert "2 of 1000 elements wrong" in msg and "first at index 17" in msg
    assert "got 0.5, expected 0" in msg and "max abs error 2" in msg


def test_poison_is_reported_as_unwritten():
    ref = np.ones(10, np.float32)
    got = ref.copy()
    got[5:] = np.nan
    msg = compare_output("c", got, ref, 1e-6, 1e-6)
    assert "5 of 10" in msg and "first at index 5" in msg and "poison" in msg and "inf" in msg


def test_2d_index_and_bf16():
    ref = np.zeros((4, 8), np.float32)
    got = ref.astype(ml_dtypes.bfloat16)
    got[2, 3] = 1
    msg = compare_output("y", got, ref, 1e-3, 1e-3)
    assert "first at index (2, 3)" in msg


def test_nan_expected_nan_is_fine_and_custom_compare():
    ref = np.array([np.nan, 1.0], np.float32)
    assert compare_output("c", ref.copy(), ref, 0, 0) is None
    msg = compare_output("c", ref, ref, 0, 0, compare=lambda out, r: "order differs")
    assert msg == "`c`: order differs"
