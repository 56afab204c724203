"""Simulated annealing over the discrete space: a random neighbour is accepted when it is better,
or with probability exp(-relative loss / temperature) when worse; the temperature falls
geometrically. Batches are a short chain of proposals from the current point."""

from __future__ import annotations

import math

from .base import Config, SearchSpace, Strategy


class Annealing(Strategy):
    name = "annealing"

    def __init__(
        self,
        space: SearchSpace,
        seed: int = 0,
        start: Config | None = None,
        t0: float = 0.3,
        cooling: float = 0.85,
        max_stale: int = 12,
    ) -> None:
        super().__init__(space, seed, start)
        self.t = t0
        self.cooling = cooling
        self.max_stale = max_stale
        self.current: Config | None = None
        self._stale = 0
        self._last_best = math.inf
        self._judged: set[tuple[str, ...]] = set()

    def _next(self, n: int) -> list[Config]:
        if self.current is None:
            self.current = self.start or self.space.random(self.rng, self.asked)
            if self.current is None:
                return []
            if self.space.key(self.current) not in self.asked:
                return [self.current]
            # The start was measured already (the tuner's baseline): anneal from it. Returning
            # nothing here ended a tuning run before its first point. It is the current point,
            # not a proposal to accept, whether or not its cost is known yet.
            self._judged.add(self.space.key(self.current))
        here = self.costs.get(self.space.key(self.current), math.inf)
        # Accept or reject the proposals of the last batch.
        for key, cost in list(self.costs.items()):
            if key in self._judged:
                continue
            self._judged.add(key)
            if cost < here or (
                math.isfinite(cost)
                and math.isfinite(here)
                and self.rng.random() < math.exp(-(cost - here) / max(here, 1e-12) / max(self.t, 1e-9))
            ):
                self.current, here = self.space.config(key), cost
        self.t *= self.cooling
        best = self.best[1] if self.best else math.inf
        self._stale = 0 if best < self._last_best else self._stale + 1
        self._last_best = min(best, self._last_best)
        if self._stale >= self.max_stale:
            return []
        options = [c for c in self.space.neighbours(self.current) if self.space.key(c) not in self.asked]
        self.rng.shuffle(options)
        out = options[:n]
        if not out:
            c = self.space.random(self.rng, self.asked)
            return [c] if c else []
        return out
