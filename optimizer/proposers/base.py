"""The proposer interface: each round, offer N candidate `.cu` texts; afterwards, hear how they
did (the tuner steers its search with that; the LLM gets it through the next prompt)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..features import Features
from ..model import Outcome, Proposal


@dataclass
class RoundContext:
    round: int  # 1-based
    count: int  # how many candidates to offer
    features: Features  # with the profile of the current best
    best: Outcome  # the current best (the original in round 1)
    last_round: list[Outcome] = field(default_factory=list)  # outcomes of the previous round
    cancel: threading.Event = field(default_factory=threading.Event)


class Proposer(ABC):
    name = "proposer"
    # Whether the loop stops when a round brings no improvement (the tuner decides that itself).
    stop_when_stalled = True
    # Whether the proposer reads the profile (ncu) of each round's best in its features: each
    # costs seconds of ncu. The baseline and the final best are profiled regardless, for the report.
    reads_profile = True
    # Whether every proposal is the user's own code (the tuner's: other constants in the user's
    # file). Otherwise the round is judged: the baseline too runs the judged road, so that the
    # candidates' figures and the baseline's are measured alike (runner/judge.py).
    proposes_trusted = False

    @abstractmethod
    def propose(self, ctx: RoundContext) -> list[Proposal]:
        """Up to ctx.count proposals; [] means the proposer has nothing more to offer."""

    def seed(self, baseline: Outcome) -> None:  # noqa: B027 - optional hook
        """The kernel as written, measured, before round 1."""

    def observe(self, outcomes: list[Outcome]) -> None:  # noqa: B027 - optional hook
        """The outcomes of the proposals of the round just evaluated, in the same order."""

    def settings(self) -> dict[str, object]:
        """For the report. Never includes secrets."""
        return {"proposer": self.name}
