"""Plain data of an optimization run: what a proposer offers, what each gate found, what the run
concluded. Nothing here knows LSP, HTTP or CUDA."""

from __future__ import annotations

import enum
import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from kernel_lsp.gpu_reports import ProfileReport, SanitizerReport


class Status(str, enum.Enum):
    """Where a candidate stopped. The first gate it failed, or `correct` when it passed all three."""

    REQUEST_FAILED = "request_failed"  # the LLM request failed (timeout, HTTP error)
    NO_CODE = "no_code"  # the answer held no usable kernel
    DUPLICATE = "duplicate"  # same source as an earlier candidate: not run again
    COMPILE_ERROR = "compile_error"  # gate 1: NVRTC
    CANNOT_LAUNCH = "cannot_launch"  # block too large, registers or shared memory over the SM's
    UNSAFE = "unsafe"  # static checks (new mutable global state), or the fence around LLM host code
    INCORRECT = "incorrect"  # gate 2: the GPU verifier (spec reference, original's outputs)
    SUSPICIOUS = "suspicious"  # faster than the speed of light: not trusted
    CORRECT = "correct"  # gate 3 timed it
    # Correct and faster, but compute-sanitizer found a bug before it could be offered.
    SANITIZER = "sanitizer_finding"

    @property
    def label(self) -> str:
        return self.value.replace("_", " ")


@dataclass(frozen=True)
class Proposal:
    """One candidate as a proposer offers it: a whole `.cu` text, or why there is none."""

    origin: str  # "llm", "tune"
    source: str | None
    note: str = ""  # what the proposer says it changed ("BLOCK=512 ITEMS=4", the LLM's summary)
    failure: Status | None = None  # REQUEST_FAILED or NO_CODE when source is None
    detail: str = ""  # the failure's message
    config: dict[str, str] | None = None  # the tuner's configuration
    answer: str | None = None  # the LLM's raw answer (kept for the report)
    # The user's own code (the original, a tuner's constants in it): its host code runs unfenced.
    # An LLM's is not: the fence checks it, it runs sandboxed and is proven before an offer.
    trusted: bool = False


@dataclass
class Figures:
    """What the GPU measured for one candidate (sum over the spec's timing cases)."""

    latency_s: float
    p10_s: float = 0.0
    p90_s: float = 0.0
    samples: int = 0
    roofline: float = 0.0  # fraction of the roofline bound reached (0.8 = 80 %)
    bound: str = ""  # "DRAM" or "float32 peak"
    bandwidth_Bps: float = 0.0
    cases: list[str] = field(default_factory=list)
    over_bound: str = ""  # why a roofline figure over 100% is not a plain result
    bound_note: str = ""  # "no compute bound known (...)"

    @property
    def roofline_text(self) -> str:
        """`96% DRAM`, or `⚠ 206% float32 peak (over 100%)`."""
        if not self.roofline:
            return "-"
        text = f"{self.roofline * 100:.0f}% {self.bound}"
        return f"⚠ {text} (over 100%)" if self.over_bound or self.roofline > 1.0 else text


@dataclass
class Resources:
    """Per-kernel compile resources of a candidate (from ptxas), with the launch's occupancy."""

    kernel: str
    registers: int
    shared_bytes: int
    spill_bytes: int
    block: int | None = None
    occupancy: float | None = None  # active warps / max warps
    limiter: str | None = None


@dataclass
class Outcome:
    """One candidate after the gates."""

    id: str  # "r2c3" (round 2, candidate 3); "baseline" for the kernel as written
    round: int
    origin: str
    status: Status
    note: str = ""
    source: str | None = None
    config: dict[str, str] | None = None
    message: str = ""  # why it failed, in one paragraph (compile log excerpt, mismatch report)
    findings: list[str] = field(default_factory=list)  # static checks: "line 7: inline asm block"
    figures: Figures | None = None
    resources: list[Resources] = field(default_factory=list)
    speedup: float | None = None  # baseline latency / this latency (from the check's timing)
    seconds: float = 0.0  # wall time spent on this candidate in this run
    cost_s: float = 0.0  # what its gates cost when first evaluated (kept through the cache)
    cached: bool = False
    profile: ProfileReport | None = None  # ncu's view, for the baseline and each round's best
    extraction: str = ""  # what extraction did to the answer (spliced, includes added), if anything
    trusted: bool = False  # see Proposal.trusted
    proof: SanitizerReport | None = None  # the proof gate's run, for a candidate about to be offered

    @property
    def latency_s(self) -> float | None:
        return self.figures.latency_s if self.figures else None

    @property
    def source_hash(self) -> str:
        return source_hash(self.source or "")

    def to_dict(self, with_source: bool = True) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["profile"] = self.profile.to_dict() if self.profile else None
        d["proof"] = self.proof.to_dict() if self.proof else None
        if not with_source:
            d.pop("source", None)
        return d


@dataclass
class Comparison:
    """The interleaved A/B of the best candidate against the kernel as written."""

    speedup: float
    ci_low: float
    ci_high: float
    samples: int
    problems: list[str] = field(default_factory=list)


@dataclass
class RoundSummary:
    round: int
    proposed: int
    compiled: int
    correct: int
    best_id: str | None
    best_latency_s: float | None
    improved: bool


@dataclass
class RunResult:
    """Everything a run found. `accepted` is the candidate offered to the user, or None, and
    `verdict` says in one sentence why."""

    path: str
    kernel: str
    proposer: str
    original: str
    baseline: Outcome
    outcomes: list[Outcome] = field(default_factory=list)
    rounds: list[RoundSummary] = field(default_factory=list)
    best: Outcome | None = None
    comparison: Comparison | None = None
    accepted: Outcome | None = None
    verdict: str = ""
    stop_reason: str = ""
    seconds: float = 0.0
    device: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # never holds an API key
    features: str = ""  # the features text given to the proposer in round 1
    report_paths: list[str] = field(default_factory=list)
    report_problem: str = ""  # why no report was written (a `.kernel-lsp` link, a full disk)
    proof_note: str = ""  # what the proof gate did for the offer (or why it did not run)
    sandbox: str = ""  # where host code an LLM wrote ran (an entry spec's candidates)

    def failures(self) -> dict[str, int]:
        """How many candidates stopped at each failing gate: {"compile error": 2, ...}."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            if o.status not in (Status.CORRECT, Status.DUPLICATE):
                counts[o.status.label] = counts.get(o.status.label, 0) + 1
        return counts


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
