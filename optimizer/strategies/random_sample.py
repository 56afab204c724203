"""Uniform random sampling without repeats: a baseline for the guided strategies."""

from __future__ import annotations

from .base import Config, Strategy


class RandomSample(Strategy):
    name = "random_sample"

    def _next(self, n: int) -> list[Config]:
        out: list[Config] = []
        if self.start and self.space.key(self.start) not in self.asked:
            out.append(self.start)
        taken = set(self.asked) | {self.space.key(c) for c in out}
        while len(out) < n:
            c = self.space.random(self.rng, taken)
            if c is None:
                break
            taken.add(self.space.key(c))
            out.append(c)
        return out
