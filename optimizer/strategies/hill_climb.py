"""Steepest-descent hill climbing over neighbouring values, with random restarts.

From the current point, every untried neighbour (one parameter one step up or down) is evaluated;
the search moves to the best neighbour that beats the current point. At a local optimum it
restarts from a random untried configuration; it stops after `patience` restarts in a row that do
not improve the best cost found (or when the space is used up). On the smooth-with-bumps cost
landscapes of launch parameters this finds the best configuration in a fraction of the
evaluations that exhaustive search needs (tests/test_optimizer_strategies.py measures it).
"""

from __future__ import annotations

import math

from .base import Config, SearchSpace, Strategy


class HillClimb(Strategy):
    name = "hill_climb"

    def __init__(
        self, space: SearchSpace, seed: int = 0, start: Config | None = None, patience: int = 2
    ) -> None:
        super().__init__(space, seed, start)
        self.patience = patience
        self.current: Config | None = None
        self._best_at_restart = math.inf
        self._restarts_without_gain = 0
        self.restarts = 0

    def _cost(self, c: Config) -> float | None:
        return self.costs.get(self.space.key(c))

    def _fresh(self, point: Config, n: int) -> list[Config]:
        """The point (when untried) and its untried neighbours, up to n."""
        out = [point] if self.space.key(point) not in self.asked else []
        for c in self.space.neighbours(point):
            if len(out) >= n:
                break
            if self.space.key(c) not in self.asked:
                out.append(c)
        return out

    def _far_point(self, tries: int = 8) -> Config | None:
        """A random untried configuration, the one of a few draws farthest (in value steps) from
        everything tried: restarts then explore other basins instead of the one just left."""
        draws = []
        for _ in range(tries):
            c = self.space.random(self.rng, self.asked)
            if c is None:
                break
            draws.append(c)
        if not draws:
            return None

        def index(c: Config) -> list[int]:
            return [self.space.values[n].index(c[n]) for n in self.space.names]

        tried = [index(self.space.config(k)) for k in self.costs]

        def distance(c: Config) -> int:
            i = index(c)
            return min((sum(abs(a - b) for a, b in zip(i, t, strict=True)) for t in tried), default=0)

        return max(draws, key=distance)

    def _next(self, n: int) -> list[Config]:
        if self.current is None:
            self.current = self.start or self.space.random(self.rng, self.asked)
            if self.current is None:
                return []
            return self._fresh(self.current, n)
        # Climb as far as the evaluated neighbours allow.
        while True:
            here = self._cost(self.current)
            if here is None:
                # Still untried (a batch was cut short): try it first.
                return self._fresh(self.current, n)
            told = [(self._cost(c), c) for c in self.space.neighbours(self.current)]
            better = [(cost, c) for cost, c in told if cost is not None and cost < here]
            if not better:
                break
            self.current = min(better, key=lambda t: t[0])[1]
        todo = self._fresh(self.current, n)
        if todo:
            return todo
        # A local optimum: restart, unless restarts stopped paying off.
        best = self.best[1] if self.best else math.inf
        if best < self._best_at_restart:
            self._restarts_without_gain = 0
        else:
            self._restarts_without_gain += 1
        self._best_at_restart = best
        if self._restarts_without_gain >= self.patience:
            return []
        point = self._far_point()
        if point is None:
            return []
        self.restarts += 1
        self.current = point
        return self._fresh(point, n)
