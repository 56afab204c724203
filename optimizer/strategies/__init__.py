"""Search strategies behind one ask/tell interface (see base.py)."""

from __future__ import annotations

from .annealing import Annealing
from .base import Config, SearchSpace, Strategy, run
from .brute_force import BruteForce
from .hill_climb import HillClimb
from .random_sample import RandomSample

STRATEGIES: dict[str, type[Strategy]] = {s.name: s for s in (HillClimb, Annealing, RandomSample, BruteForce)}
DEFAULT_STRATEGY = HillClimb.name


def make_strategy(name: str, space: SearchSpace, seed: int = 0, start: Config | None = None) -> Strategy:
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown search strategy `{name}`; choose one of {', '.join(STRATEGIES)}") from None
    return cls(space, seed=seed, start=start)


__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Config", "SearchSpace", "Strategy", "make_strategy", "run"]
