"""The search-strategy interface (after Kernel Tuner's split of strategies from backends and
observers): a strategy only decides which configurations to try next.

A strategy is driven by ask/tell so that the FSR loop keeps control of evaluation (batches per
round, the GPU, the cache, cancellation):

    s = make_strategy("hill_climb", space, seed=0, start=current)
    while configs := s.ask(8):
        for c in configs:
            s.tell(c, cost(c))      # cost: seconds, or None when the candidate failed a gate

Costs are minimised. A configuration is asked at most once.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping

Config = dict[str, str]
Key = tuple[str, ...]


def _order(values: tuple[str, ...]) -> tuple[str, ...]:
    """Numeric values in numeric order (so neighbours are adjacent sizes); others as written."""
    if all(re.fullmatch(r"-?\d+(\.\d+)?", v) for v in values):
        return tuple(sorted(dict.fromkeys(values), key=float))
    return tuple(dict.fromkeys(values))


class SearchSpace:
    """The cross product of the parameters' values, minus what `allowed` rules out (configurations
    that cannot launch, found without compiling)."""

    def __init__(
        self,
        params: Mapping[str, tuple[str, ...]],
        allowed: Callable[[Config], bool] | None = None,
    ) -> None:
        self.names = list(params)
        self.values = {n: _order(tuple(v)) for n, v in params.items()}
        self._allowed = allowed or (lambda c: True)
        self._allowed_cache: dict[Key, bool] = {}

    def key(self, config: Mapping[str, str]) -> Key:
        return tuple(str(config[n]) for n in self.names)

    def config(self, key: Key) -> Config:
        return dict(zip(self.names, key, strict=True))

    @property
    def raw_size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def allowed(self, config: Mapping[str, str]) -> bool:
        k = self.key(config)
        if k not in self._allowed_cache:
            try:
                self._allowed_cache[k] = bool(self._allowed(dict(config)))
            except Exception:
                self._allowed_cache[k] = False
        return self._allowed_cache[k]

    def __iter__(self) -> Iterator[Config]:
        for combo in itertools.product(*(self.values[n] for n in self.names)):
            c = self.config(combo)
            if self.allowed(c):
                yield c

    def size(self) -> int:
        return sum(1 for _ in self)

    def neighbours(self, config: Mapping[str, str]) -> list[Config]:
        """Configurations one step away in one parameter (the next smaller or larger value)."""
        out = []
        for n in self.names:
            vals = self.values[n]
            i = vals.index(config[n]) if config[n] in vals else 0
            for j in (i - 1, i + 1):
                if 0 <= j < len(vals):
                    c = dict(config)
                    c[n] = vals[j]
                    if self.allowed(c):
                        out.append(c)
        return out

    def random(self, rng: random.Random, exclude: set[Key]) -> Config | None:
        """A random allowed configuration not in `exclude`, or None when none is left."""
        for _ in range(64):
            c = {n: rng.choice(self.values[n]) for n in self.names}
            if self.key(c) not in exclude and self.allowed(c):
                return c
        rest = [c for c in self if self.key(c) not in exclude]
        return rng.choice(rest) if rest else None


class Strategy(ABC):
    name = "strategy"

    def __init__(self, space: SearchSpace, seed: int = 0, start: Config | None = None) -> None:
        self.space = space
        self.rng = random.Random(seed)
        self.start = dict(start) if start and space.allowed(start) else None
        self.asked: set[Key] = set()
        self.costs: dict[Key, float] = {}

    @abstractmethod
    def _next(self, n: int) -> list[Config]:
        """Up to n configurations never asked before; [] when the strategy is done."""

    def ask(self, n: int) -> list[Config]:
        out = []
        for c in self._next(max(1, n)):
            k = self.space.key(c)
            if k not in self.asked:
                self.asked.add(k)
                out.append(c)
        return out

    def tell(self, config: Mapping[str, str], cost: float | None) -> None:
        self.costs[self.space.key(config)] = math.inf if cost is None else float(cost)

    @property
    def best(self) -> tuple[Config, float] | None:
        if not self.costs:
            return None
        k = min(self.costs, key=lambda k: self.costs[k])
        return self.space.config(k), self.costs[k]


def run(
    strategy: Strategy, cost: Callable[[Config], float | None], batch: int = 4, budget: int = 10**9
) -> tuple[Config | None, float, int]:
    """Drive a strategy to the end on a cost function: (best config, best cost, evaluations)."""
    evaluations = 0
    while evaluations < budget:
        configs = strategy.ask(min(batch, budget - evaluations))
        if not configs:
            break
        for c in configs:
            strategy.tell(c, cost(c))
            evaluations += 1
    best = strategy.best
    return (best[0], best[1], evaluations) if best else (None, math.inf, evaluations)
