"""What a GPU check answers, as plain results: each spec'd kernel's verdict and figures
(`KernelCheck`, with its `CaseTiming`s and the `Problem`s found), an A/B (`Comparison`), and the
device it ran on (`DeviceInfo`). The runner and the evaluation backends produce them; the
Workspace, the optimizer and the front ends read them without reaching into the machinery
(issue 47). Each says the host and GPU it came from (several backends may serve one run)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernel_lsp.gpu_reports import OccupancyFigure, ProfileReport
from kernel_lsp.model import CheckStatus, Diagnostic
from kernel_lsp.stats import Measurement, format_seconds


@dataclass
class Problem:
    kind: str  # mismatch, unwritten, guard, input_modified, race, baseline_mismatch, crash,
    # timeout, launch_error, spec_error, suspicious
    case: str
    message: str
    output: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DeviceInfo:
    name: str
    index: int = 0
    arch: str = "sm_90"
    sm_count: int = 0
    sm_clock_mhz: int = 0
    mem_clock_mhz: int = 0
    l2_bytes: int = 0
    smem_per_sm: int = 0
    regs_per_sm: int = 0
    max_threads_per_sm: int = 0
    total_mem_bytes: int = 0
    driver_version: int = 0
    pci_bus_id: int = 0
    copy_bandwidth_Bps: float = 0.0  # measured device-to-device copy, bytes read + written per s
    # The memory bound's rate: the best of the copy and the klsp_stream_* kernels (bytes per s).
    memory_bandwidth_Bps: float = 0.0
    memory_bandwidth_source: str = ""  # which measurement gave it, e.g. "klsp_stream_add"
    peak_flops: dict[str, float] = field(default_factory=dict)  # per dtype, FLOP/s
    peak_source: dict[str, str] = field(default_factory=dict)  # "measured" or "derived"
    measured_at: float = 0.0
    fake: bool = False

    @property
    def short_name(self) -> str:
        """ "H200" from "NVIDIA H200", "H100" from "NVIDIA H100 80GB HBM3"."""
        words = self.name.replace("NVIDIA", "").split()
        return words[0] if words else self.name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceInfo:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @property
    def bandwidth_Bps(self) -> float:
        """The rate of the memory bound (device descriptions cached before it existed: the copy)."""
        return self.memory_bandwidth_Bps or self.copy_bandwidth_Bps


@dataclass
class CaseTiming:
    case: str
    sizes: dict[str, int]
    measurement: Measurement
    bytes: float = 0.0
    flops: float = 0.0
    bandwidth_Bps: float = 0.0
    flops_per_s: float = 0.0
    roofline: float = 0.0  # fraction of the roofline bound reached (1.0 = at the bound)
    bound: str = ""  # "DRAM" or "<dtype> peak"
    suspicious: str | None = None
    over_bound: str | None = None  # why a roofline figure over 100% is not a plain result
    compute_bound: bool = False  # whether the spec's work gave flops to bound the time with
    bound_note: str = ""  # "no compute bound known (...)", where the bound came from
    clock: str = ""  # how the samples were taken (CUDA events, or the judge's clock end to end)

    @property
    def roofline_text(self) -> str:
        """`96% DRAM`, or `⚠ 206% float32 peak (suspicious)` for a figure over its bound."""
        if not self.roofline:
            return ""
        text = f"{self.roofline * 100:.0f}% {self.bound}"
        if self.over_bound:
            return f"⚠ {text} ({'suspicious' if self.suspicious else 'over the bound'})"
        return text


@dataclass
class KernelCheck:
    kernel: str
    status: CheckStatus  # a plain word is read as its CheckStatus
    ok: bool = False
    message: str = ""
    problems: list[Problem] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)  # [{case, ok}] verified cases
    timings: list[CaseTiming] = field(default_factory=list)
    device: DeviceInfo | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    duration_s: float = 0.0
    # Where duration_s went, in seconds by phase: the worker's (`inputs+reference`, `verify`,
    # `timing inputs`, `timed runs`, ...), the driver's (`compile` where the file was compiled
    # again for the device, `prepare`: spec and launch steps, `transfer`: the request's round trip
    # beyond the worker's phases), for `check -v`.
    phases: dict[str, float] = field(default_factory=dict)
    spec_name: str = ""
    # Achieved occupancy per kernel of the pipeline, from ncu on the largest timed case; the note
    # says why there is none (not asked for, no ncu, counters not permitted).
    occupancy: list[OccupancyFigure] = field(default_factory=list)
    occupancy_note: str = ""
    # The same run's profile: limiter, speed of light, stalls, hottest lines (None until read).
    profile: ProfileReport | None = None
    # Where it ran: the host name and the device index there (one backend per GPU).
    host: str = ""
    device_index: int | None = None
    entry: bool = False  # `kernel` names a host entry (its own launches), not a kernel

    def __post_init__(self) -> None:
        self.status = CheckStatus(self.status)

    @property
    def headline(self) -> str:
        """`0.201 ms · 96% of DRAM roofline · H200` for the largest timed case."""
        if not self.ok:
            return self.message
        if not self.timings:
            return "verified" + (f" · {self.device.short_name}" if self.device else "")
        t = self.timings[-1]
        parts = [format_seconds(t.measurement.median_s)]
        if t.over_bound:
            parts.append(f"{t.roofline_text} roofline")
        elif t.roofline:
            parts.append(f"{t.roofline * 100:.0f}% of {t.bound} roofline")
        if self.device:
            parts.append(self.device.short_name)
        return " · ".join(parts)


@dataclass
class Comparison:
    """Candidate against baseline, timed interleaved. speedup = baseline median / candidate
    median; [ci_low, ci_high] its bootstrap interval. `faster` only when the lower bound clears
    the threshold and nothing is suspicious or wrong."""

    speedup: float
    ci_low: float
    ci_high: float
    n: int
    baseline: Measurement | None
    candidate: Measurement | None
    case: str = ""
    faster: bool = False
    suspicious: str | None = None
    problems: list[Problem] = field(default_factory=list)
    error: str | None = None
    # The one device both sides ran on (a speedup is never measured across devices).
    host: str = ""
    device_index: int | None = None
    device_name: str = ""
    # A judge's A/B: the pairs of processes it was timed in (evaluation/local.LocalBackend._pooled).
    pairs: int = 1
