"""Progress of a run, for whoever watches (the CLI's progress lines, the editor's $/progress,
a test's recorder): observers are plain callables that receive ProgressEvents."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from .model import Outcome


@dataclass(frozen=True)
class ProgressEvent:
    kind: str  # baseline, profile, round_start, candidate, round_end, compare, done
    round: int
    rounds: int | None
    proposed: int  # candidates evaluated so far
    compiled: int
    correct: int
    best_speedup: float | None
    message: str
    outcome: Outcome | None = None

    @property
    def headline(self) -> str:
        """`round 2/3 · 7 candidates, 5 compiled, 3 correct · best 1.42x`."""
        rounds = f"/{self.rounds}" if self.rounds else ""
        best = f" · best {self.best_speedup:.2f}x" if self.best_speedup else ""
        return f"round {self.round}{rounds} · {self.proposed} candidates, {self.compiled} compiled, {self.correct} correct{best}"


class PrintObserver:
    """One line per event on a terminal stream (stderr: stdout carries the diff)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, e: ProgressEvent) -> None:
        if e.kind == "candidate" and e.outcome is not None:
            o = e.outcome
            figs = f" {o.figures.latency_s * 1e6:.2f} us" if o.figures else ""
            speed = f" ({o.speedup:.2f}x)" if o.speedup and o.status.value in ("correct", "duplicate") else ""
            note = f" [{o.note}]" if o.note else ""
            cached = " (cached)" if o.cached else ""
            print(f"  {o.id}: {o.status.label}{figs}{speed}{note}{cached}", file=self.stream, flush=True)
        elif e.kind == "round_end":
            print(f"  {e.headline}", file=self.stream, flush=True)
        else:
            print(f"{e.message}", file=self.stream, flush=True)
