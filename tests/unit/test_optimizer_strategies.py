"""The tuner's search strategies on synthetic cost functions (no GPU, no compiler)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_lsp.optimizer.strategies import STRATEGIES, SearchSpace, make_strategy, run

PARAMS = {
    "BLOCK": ("256", "32", "64", "128", "512", "1024"),  # written out of order, as in a tune line
    "ITEMS": ("1", "2", "4", "8", "16"),
    "VEC": ("1", "2", "4", "8"),
}


def bumpy(c: dict[str, str]) -> float:
    """A bowl (optimum at BLOCK=256, ITEMS=4, VEC=8) with ripples that make local optima."""
    a, b, v = math.log2(int(c["BLOCK"])), math.log2(int(c["ITEMS"])), math.log2(int(c["VEC"]))
    return (a - 8) ** 2 + 0.7 * (b - 2) ** 2 + (v - 3) ** 2 + 0.3 * math.sin(3 * a + b) + 5


def optimum(params, cost, allowed=None):
    space = SearchSpace(params, allowed)
    return min(space, key=cost), space.size()


START = {"BLOCK": "256", "ITEMS": "1", "VEC": "1"}


def test_values_are_ordered_numerically():
    space = SearchSpace(PARAMS)
    assert space.values["BLOCK"] == ("32", "64", "128", "256", "512", "1024")
    assert space.raw_size == 120


@pytest.mark.parametrize("name", ["hill_climb", "annealing"])
def test_guided_strategies_find_the_optimum_in_fewer_evaluations_than_brute_force(name):
    best, size = optimum(PARAMS, bumpy)
    evaluations = []
    for seed in range(10):
        s = make_strategy(name, SearchSpace(PARAMS), seed=seed, start=START)
        found, cost, n = run(s, bumpy, batch=4)
        assert found == best, f"{name} seed {seed} ended at {found} ({cost:.3f})"
        evaluations.append(n)
    brute = make_strategy("brute_force", SearchSpace(PARAMS), start=START)
    assert run(brute, bumpy, batch=4)[2] == size
    assert max(evaluations) < size
    assert sum(evaluations) / len(evaluations) < 0.5 * size, evaluations


def test_hill_climb_restarts_escape_a_local_optimum():
    # Two basins: a shallow one around the start, the global one far away.
    def two_basins(c):
        a, b = int(c["BLOCK"]), int(c["ITEMS"])
        near = abs(math.log2(a) - 6) + abs(math.log2(b) - 0)
        far = abs(math.log2(a) - 10) + abs(math.log2(b) - 4)
        return min(2 + near, far)

    params = {"BLOCK": PARAMS["BLOCK"], "ITEMS": PARAMS["ITEMS"]}
    best, _ = optimum(params, two_basins)
    hits = 0
    for seed in range(10):
        s = make_strategy("hill_climb", SearchSpace(params), seed=seed, start={"BLOCK": "64", "ITEMS": "1"})
        found, _, _ = run(s, two_basins, batch=2)
        hits += found == best
    assert hits >= 8


def test_brute_force_visits_every_allowed_configuration_once():
    allowed = lambda c: int(c["BLOCK"]) * int(c["VEC"]) <= 2048  # noqa: E731
    space = SearchSpace(PARAMS, allowed)
    seen = []
    s = make_strategy("brute_force", space, start=START)
    while configs := s.ask(7):
        seen += [space.key(c) for c in configs]
        for c in configs:
            s.tell(c, 1.0)
    assert len(seen) == len(set(seen)) == space.size() < space.raw_size


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_no_strategy_asks_a_ruled_out_or_repeated_configuration(name):
    allowed = lambda c: int(c["BLOCK"]) * int(c["ITEMS"]) <= 1024  # noqa: E731
    space = SearchSpace(PARAMS, allowed)
    s = make_strategy(name, space, seed=3, start=START)
    seen = set()
    for _ in range(200):
        configs = s.ask(5)
        if not configs:
            break
        for c in configs:
            assert allowed(c) and space.key(c) not in seen
            seen.add(space.key(c))
            s.tell(c, bumpy(c))


def test_failed_configurations_count_as_infinitely_slow():
    s = make_strategy("hill_climb", SearchSpace(PARAMS), start=START)
    found, cost, _ = run(s, lambda c: None if c["VEC"] == "8" else bumpy(c), batch=4)
    assert found["VEC"] != "8" and math.isfinite(cost)


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown search strategy `genetic`"):
        make_strategy("genetic", SearchSpace(PARAMS))


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seed=st.integers(0, 1000),
    target=st.integers(0, 10**6),
)
def test_hill_climb_always_ends_and_returns_a_told_configuration(sizes, seed, target):
    params = {f"P{i}": tuple(str(v) for v in range(n)) for i, n in enumerate(sizes)}
    rng_cost = lambda c: (hash((tuple(sorted(c.items())), target)) % 1000) / 7.0  # noqa: E731
    s = make_strategy("hill_climb", SearchSpace(params), seed=seed)
    found, cost, n = run(s, rng_cost, batch=3)
    assert found is not None and n <= math.prod(sizes)
    assert cost == rng_cost(found)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_start_measured_as_the_baseline_still_gets_a_first_round(name):
    """The tuner asks its strategy only after the configuration as written was measured as the
    baseline (asked and told, never proposed): the first ask must still offer points. Annealing
    offered none, so `--strategy annealing` ended before its first point."""
    space = SearchSpace({"BLOCK": ("64", "128", "256", "512"), "ITEMS": ("1", "2", "4")})
    start = {"BLOCK": "256", "ITEMS": "1"}
    strategy = make_strategy(name, space, seed=3, start=start)
    strategy.asked.add(space.key(start))
    strategy.tell(start, 1e-4)
    first = strategy.ask(4)
    assert first and start not in first, first
