"""The statistics behind the stop rule and the A/B speedup bound."""

from __future__ import annotations

import numpy as np

from kernel_lsp.stats import bootstrap_ratio, coefficient_of_variation, median_noise, summarize


def test_noise_shrinks_with_samples():
    rng = np.random.default_rng(0)
    small = median_noise(1e-4 * (1 + 0.02 * rng.standard_normal(20)))
    large = median_noise(1e-4 * (1 + 0.02 * rng.standard_normal(2000)))
    assert large < small / 5
    assert 0.0005 < large < 0.002  # sqrt(pi/2) * 2% / sqrt(2000) = 0.056%


def test_noise_ignores_rare_outliers():
    x = np.full(200, 1e-4) * (1 + 0.001 * np.random.default_rng(1).standard_normal(200))
    x[::50] = 1e-2  # four preempted samples
    assert median_noise(x) < 0.001


def test_summary():
    m = summarize([3.0, 1.0, 2.0, 4.0, 5.0], cold_l2=True, device="X", case="n=1")
    assert m.median_s == 3.0 and m.n == 5 and m.p10_s < m.median_s < m.p90_s and m.min_s == 1.0


def test_bootstrap_bounds_the_true_ratio():
    rng = np.random.default_rng(2)
    a = 1.2e-4 * (1 + 0.01 * rng.standard_normal(300))
    b = 1.0e-4 * (1 + 0.01 * rng.standard_normal(300))
    ratio, low, high = bootstrap_ratio(a, b)
    assert low < 1.2 < high and abs(ratio - 1.2) < 0.01 and high - low < 0.02
    _same_ratio, same_low, same_high = bootstrap_ratio(b, b[::-1])
    assert same_low <= 1.0 <= same_high and same_low < 1.02


def test_cv():
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert abs(coefficient_of_variation([0.99, 1.0, 1.01]) - 0.01) < 1e-9
