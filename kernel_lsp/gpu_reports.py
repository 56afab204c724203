"""What the GPU's tools said, as plain results: Nsight Compute's profile of a pipeline
(`ProfileReport`: each kernel's limiter and stalls, its hottest lines, its occupancy) and
compute-sanitizer's proof-gate run (`SanitizerReport`). The runner's modules produce them
(runner/profile.py, runner/sanitizer.py); the optimizer, the Workspace and the front ends read
them without reaching into the runner (issue 47)."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

STALL_LABELS = {
    "long_scoreboard": "long scoreboard",
    "short_scoreboard": "short scoreboard",
    "lg_throttle": "LG throttle",
    "mio_throttle": "MIO throttle",
    "math_pipe_throttle": "math pipe throttle",
    "tex_throttle": "TEX throttle",
    "imc_miss": "IMC miss",
    "no_instruction": "no instruction",
    "dispatch_stall": "dispatch stall",
    "branch_resolving": "branch resolving",
    "not_selected": "not selected",
}


# What the warp waits for: said in hover and in the LLM prompt.
STALL_MEANINGS = {
    "long_scoreboard": "waiting for global/local memory (L1TEX) results",
    "short_scoreboard": "waiting for shared memory or special-function results (MIO)",
    "barrier": "waiting at __syncthreads for the rest of the block",
    "mio_throttle": "the shared-memory/special-instruction queue is full",
    "lg_throttle": "the global/local memory instruction queue is full",
    "math_pipe_throttle": "a math pipe is busy",
    "wait": "a fixed-latency dependency",
    "not_selected": "eligible, but another warp issued",
    "no_instruction": "no instruction fetched (instruction cache, branch targets)",
    "branch_resolving": "waiting for a branch target",
    "drain": "waiting for stores to drain at exit",
    "membar": "waiting at a memory barrier",
    "dispatch_stall": "the dispatcher held the instruction",
    "tex_throttle": "the texture queue is full",
    "imc_miss": "constant cache miss",
    "sleeping": "sleeping (nanosleep or a yield)",
    "gmma": "waiting for a warpgroup MMA",
}


def stall_label(reason: str) -> str:
    return STALL_LABELS.get(reason, reason.replace("_", " "))


@dataclass(frozen=True)
class Stall:
    reason: str  # ncu's name: long_scoreboard
    warps_per_issue: float  # average warps stalled on it per issued instruction
    share: float  # of all stalled warps (selected excluded), 0..1

    @property
    def label(self) -> str:
        return stall_label(self.reason)

    @property
    def meaning(self) -> str:
        return STALL_MEANINGS.get(self.reason, "")


@dataclass
class KernelProfile:
    """One kernel of a pipeline under ncu, on the largest timed case."""

    kernel: str
    case: str = ""
    limiter: str = "unknown"  # memory-bound, compute-bound, latency-bound, launch-bound, unknown
    evidence: str = ""  # the figure that shows it: "L1/shared at 87% of peak"
    sol: dict[str, float] = field(default_factory=dict)  # label -> % of peak
    memory_pct: float | None = None
    compute_pct: float | None = None
    top_pipe: str = ""
    top_pipe_pct: float | None = None
    achieved_occupancy: float | None = None  # 0..1
    theoretical_occupancy: float | None = None  # 0..1
    stalls: list[Stall] = field(default_factory=list)  # top first
    bank_conflicts: int | None = None
    shared_wavefronts: int | None = None
    sectors_per_request: dict[str, float] = field(default_factory=dict)  # load/store -> sectors
    duration_s: float | None = None
    grid_blocks: int | None = None
    sm_count: int | None = None
    missing: list[str] = field(default_factory=list)  # metrics this ncu did not report

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stalls"] = [dict(asdict(s), label=s.label) for s in self.stalls]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelProfile:
        d = dict(d)
        d["stalls"] = [
            Stall(s["reason"], float(s["warps_per_issue"]), float(s["share"])) for s in d.get("stalls", [])
        ]
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def headline(self) -> str:
        """`memory-bound (L1/shared at 87% of peak)`."""
        return f"{self.limiter} ({self.evidence})" if self.evidence else self.limiter


@dataclass(frozen=True)
class HotLine:
    kernel: str
    path: str
    line: int  # 1-based, in `path`
    text: str  # the line as ncu read it
    share: float  # of the kernel's warp stall samples, 0..1
    samples: int
    top_stall: str  # ncu's reason name (long_scoreboard); "" when none
    top_stall_share: float  # of this line's samples
    instructions: int = 0
    excess_l2_sectors: int = 0  # uncoalesced global accesses on this line
    excess_shared_wavefronts: int = 0  # bank conflicts on this line

    @property
    def stall_label(self) -> str:
        return stall_label(self.top_stall) if self.top_stall else "no stall"

    @property
    def summary(self) -> str:
        """`31% of stall samples: long scoreboard` (what a code lens says)."""
        return f"{self.share:.0%} of stall samples: {self.stall_label}"

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), stall_label=self.stall_label)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HotLine:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class OccupancyFigure:
    """One kernel of a pipeline: the fraction of the SMs' warp slots in use, averaged over the
    cycles an SM was active (achieved), next to ncu's own theoretical figure."""

    kernel: str
    achieved: float  # 0..1
    theoretical: float  # 0..1
    case: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "achieved": self.achieved,
            "theoretical": self.theoretical,
            "case": self.case,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OccupancyFigure:
        return cls(str(d["kernel"]), float(d["achieved"]), float(d["theoretical"]), str(d["case"]))


@dataclass
class ProfileReport:
    """What ncu said about each kernel of a pipeline, and its hottest lines."""

    kernels: list[KernelProfile] = field(default_factory=list)
    hot_lines: list[HotLine] = field(default_factory=list)
    case: str = ""
    note: str = ""  # why there is no profile (or part of it), in words a user can act on
    wall_s: float = 0.0  # the profiling run, ncu and page printing included

    @property
    def missing(self) -> list[str]:
        return sorted({m for k in self.kernels for m in k.missing})

    @property
    def occupancy(self) -> list[OccupancyFigure]:
        return [
            OccupancyFigure(k.kernel, k.achieved_occupancy, k.theoretical_occupancy or 0.0, self.case)
            for k in self.kernels
            if k.achieved_occupancy is not None
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "kernels": [k.to_dict() for k in self.kernels],
            "hotLines": [h.to_dict() for h in self.hot_lines],
            "missing": self.missing,
            "note": self.note or None,
            "wallSeconds": round(self.wall_s, 3),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileReport:
        return cls(
            kernels=[KernelProfile.from_dict(k) for k in d.get("kernels", [])],
            hot_lines=[HotLine.from_dict(h) for h in d.get("hotLines", [])],
            case=str(d.get("case", "")),
            note=str(d.get("note") or ""),
            wall_s=float(d.get("wallSeconds", 0.0)),
        )


TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


# A finding's kind, from the tool's first line of it: the words a prompt gets (`summary`).
FINDING_KINDS = [
    (re.compile(r"Invalid __(global|shared|local)__ (read|write)"), "invalid {0} {1}"),
    (re.compile(r"Misaligned"), "misaligned access"),
    (re.compile(r"Race reported|[Hh]azard"), "race on shared memory"),
    (re.compile(r"Uninitialized __(global|shared)__ memory read"), "read of uninitialized {0} memory"),
    (re.compile(r"Barrier error|[Dd]ivergent"), "barrier in divergent code"),
    (re.compile(r"Leaked"), "device memory leaked"),
    (re.compile(r"Program hit|CUDA_ERROR|cudaError"), "a CUDA call failed"),
]


@dataclass(frozen=True)
class SanitizerFinding:
    tool: str
    message: str  # the sanitizer's first line ("Uninitialized __shared__ memory read of size 4 bytes")
    path: str = ""  # the source file it names (empty: not known)
    line: int = 0
    detail: str = ""  # the next lines of its report (where, which thread)

    def describe(self) -> str:
        where = f"{os.path.basename(self.path)}:{self.line}: " if self.line else ""
        return f"{where}{self.tool}: {self.message}"

    @property
    def kind(self) -> str:
        """What the finding is, in words of kernel-lsp's own (FINDING_KINDS)."""
        for pattern, words in FINDING_KINDS:
            m = pattern.search(self.message)
            if m:
                return words.format(*m.groups())
        return "an error of another kind"

    def summary(self) -> str:
        """The finding for a prompt: its line, tool and kind, none of its text. The launch talks
        to the tool (its injected library shares the launch's process), so the report's text is
        the candidate's to steer; the tool and the kind come from fixed lists, the line is a line
        of the candidate's own file (its number only)."""
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.tool}: {self.kind}"


@dataclass
class SanitizerReport:
    findings: list[SanitizerFinding] = field(default_factory=list)
    tools: dict[str, float] = field(default_factory=dict)  # tool -> seconds it took
    case: str = ""
    note: str = ""  # why the gate was skipped or incomplete ("compute-sanitizer is not installed")
    unconfined: bool = False  # host code an LLM wrote could not be run confined: nothing proven
    incomplete: bool = False  # a tool's launch ended before its first CUDA call: nothing proven

    @property
    def ran(self) -> bool:
        return bool(self.tools)

    @property
    def blocks_offer(self) -> bool:
        """A finding blocks the offer; so does a launch that could not be confined or that never
        reached CUDA (fail closed: nothing was proven)."""
        return bool(self.findings) or self.unconfined or self.incomplete

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.__dict__ for f in self.findings],
            "tools": self.tools,
            "case": self.case,
            "note": self.note,
            "unconfined": self.unconfined,
            "incomplete": self.incomplete,
        }


# Only the editor can turn GPU checks off (the CLI's --no-gpu skips them without asking why).
GPU_OFF_IN_EDITOR = "kernelLsp.gpu.enabled is false"
SANDBOX_REFUSED = "host code an LLM wrote does not run here: no sandbox: "
NO_DRIVER = "no NVIDIA driver is installed (libcuda cannot be loaded)"


def no_gpu_message(reason: str) -> str:
    """`no GPU: <why>`, the one wording hover, code actions, the CLI and the optimizer use. The
    driver loader's own text ("... can only be found via system search. Ensure the NVIDIA display
    driver is installed.") is for the log; users get its gist, one clause, no trailing period, so
    it reads the same inside a longer sentence."""
    why = (reason or "").strip()
    if why.startswith(SANDBOX_REFUSED):
        return why  # a GPU may well be there: the fence refused to run without a sandbox
    if why.startswith("no CUDA driver"):
        why = NO_DRIVER
    why = re.split(r"(?<=[.!?])\s", why.splitlines()[0] if why else "", maxsplit=1)[0].rstrip(". ")
    return f"no GPU: {why or 'none found'}"
