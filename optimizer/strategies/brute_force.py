"""Every allowed configuration, in order: the reference the other strategies are measured against."""

from __future__ import annotations

from .base import Config, Strategy


class BruteForce(Strategy):
    name = "brute_force"

    def _next(self, n: int) -> list[Config]:
        out = []
        if self.start and self.space.key(self.start) not in self.asked:
            out.append(self.start)
        for c in self.space:
            if len(out) >= n:
                break
            if self.space.key(c) not in self.asked and c not in out:
                out.append(c)
        return out
