"""What the proposer is given (the paper's "features"): the kernel and its launch, the spec's sizes
and dtypes, the hardware, and the measured profile of the current best kernel."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

from kernel_lsp import archs
from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.host_entry import find_host_function
from kernel_lsp.host_launch.occupancy import host_code
from kernel_lsp.profile_text import kernel_line, memory_text, sol_text
from kernel_lsp.source import parse_directives
from kernel_lsp.spec import Alias, Scalar, Spec, case_label

from .model import Figures, Resources


@dataclass
class Hardware:
    name: str
    arch: str
    sm_count: int = 0
    smem_per_sm: int = 0
    regs_per_sm: int = 0
    l2_bytes: int = 0
    bandwidth_Bps: float = 0.0  # the measured memory bound's rate (DeviceInfo.bandwidth_Bps)
    peak_flops: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_device(cls, dev: Any) -> Hardware:
        """From kernel_lsp.runner.hardware.DeviceInfo (or anything with the same fields)."""
        return cls(
            name=str(getattr(dev, "name", "?")),
            arch=str(getattr(dev, "arch", "sm_90")),
            sm_count=int(getattr(dev, "sm_count", 0) or 0),
            smem_per_sm=int(getattr(dev, "smem_per_sm", 0) or 0),
            regs_per_sm=int(getattr(dev, "regs_per_sm", 0) or 0),
            l2_bytes=int(getattr(dev, "l2_bytes", 0) or 0),
            bandwidth_Bps=float(getattr(dev, "bandwidth_Bps", 0.0) or 0.0),
            peak_flops=dict(getattr(dev, "peak_flops", {}) or {}),
        )

    def render(self) -> str:
        lim = archs.limits_for(self.arch)
        lines = [
            f"- GPU: {self.name} ({self.arch}), {self.sm_count} SMs",
            f"- per SM: {self.smem_per_sm // 1024} KiB shared memory, {self.regs_per_sm} registers"
            + (f", at most {lim.max_warps_per_sm} warps and {lim.max_blocks_per_sm} blocks" if lim else ""),
            f"- L2: {self.l2_bytes / 2**20:.0f} MiB",
            f"- measured DRAM bandwidth (best streaming kernel): {self.bandwidth_Bps / 1e9:.0f} GB/s",
        ]
        if self.peak_flops:
            peaks = ", ".join(f"{k} {v / 1e12:.1f}" for k, v in sorted(self.peak_flops.items()))
            lines.append(f"- peak TFLOP/s: {peaks}")
        return "\n".join(lines)


@dataclass
class Profile:
    """The measured figures of the current best kernel, with what ncu says limits it; after a
    round that improved, also the previous best's limiter, so the proposer sees what changed."""

    figures: Figures | None
    resources: list[Resources] = field(default_factory=list)
    ncu: ProfileReport | None = None  # None: this evaluator does not profile
    previous: ProfileReport | None = None
    previous_id: str = ""

    def render(self) -> str:
        lines = []
        f = self.figures
        if f:
            lines.append(
                f"- latency: {f.latency_s * 1e6:.2f} us median (p10 {f.p10_s * 1e6:.2f}, p90 {f.p90_s * 1e6:.2f}, "
                f"{f.samples} samples, cold L2) at {', '.join(f.cases) or 'the timing size'}"
            )
            if f.roofline:
                lines.append(f"- {f.roofline * 100:.0f}% of the {f.bound} roofline bound")
            if f.bandwidth_Bps:
                lines.append(f"- achieved {f.bandwidth_Bps / 1e9:.0f} GB/s of useful traffic")
        for r in self.resources:
            occ = (
                f", occupancy {r.occupancy * 100:.0f}% at block {r.block} (limited by {r.limiter})"
                if r.occupancy is not None
                else ""
            )
            lines.append(
                f"- `{r.kernel}`: {r.registers} registers/thread, {r.shared_bytes} B static shared, "
                f"{r.spill_bytes} B spilled{occ}"
            )
        lines += ncu_lines(self.ncu, self.previous, self.previous_id)
        return "\n".join(lines) if lines else "- not measured"


def ncu_lines(
    report: ProfileReport | None, previous: ProfileReport | None = None, previous_id: str = "", hot: int = 4
) -> list[str]:
    """The profile as prompt lines: limiter and its figure, speed of light, occupancy, stalls with
    what they mean, memory efficiency, and the hottest lines with their source text."""
    if report is None:
        why = "ncu not on PATH" if shutil.which("ncu") is None else "not collected"
        return [f"- ncu profile: none ({why})"]
    if not report.kernels:
        return [f"- ncu profile: none ({report.note or 'not collected'})"]
    lines = [f"- ncu profile ({report.case or 'timed case'}):"]
    for k in report.kernels:
        lines.append(f"  - limiter of {kernel_line(k)}")
        if k.sol:
            lines.append(f"    - speed of light: {sol_text(k)}")
        if k.achieved_occupancy is not None:
            lines.append(f"    - achieved occupancy {k.achieved_occupancy:.0%}")
        for st in k.stalls[:3]:
            meaning = f" ({st.meaning})" if st.meaning else ""
            lines.append(f"    - stall {st.label}: {st.share:.0%} of stalled warps{meaning}")
        memory = memory_text(k)
        if memory:
            lines.append(f"    - memory: {memory}")
        hottest = [h for h in report.hot_lines if h.kernel == k.kernel][:hot]
        if hottest:
            lines.append("    - hottest source lines (share of stall samples, main stall):")
            lines += [f"      - line {h.line} ({h.share:.0%}, {h.stall_label}): `{h.text}`" for h in hottest]
    if report.missing:
        lines.append(f"  - not reported by this ncu: {', '.join(report.missing)}")
    if previous is not None and previous.kernels:
        before = {k.kernel: k for k in previous.kernels}
        for k in report.kernels:
            if k.kernel in before:
                was = before[k.kernel]
                lines.append(
                    f"  - changed since {previous_id or 'the previous best'}: `{k.kernel}` was "
                    f"{was.headline}, now {k.headline}"
                )
    return lines


def describe_spec(spec: Spec) -> str:
    lines = []
    for name, arg in spec.args.items():
        if isinstance(arg, Scalar):
            value = name if arg.value is None else arg.value
            lines.append(f"- `{name}`: by value, {arg.dtype} = {value}")
        elif isinstance(arg, Alias):
            lines.append(f"- `{name}`: the same buffer as `{arg.target}`")
        else:
            lines.append(f"- `{name}`: {arg.kind}, {arg.dtype}, shape {arg.shape}")
    cases = "; ".join(case_label(s) for s in spec.verification_sizes())
    timing = "; ".join(case_label(s) for s in spec.timing_cases())
    lines.append(f"- verified at: {cases} (fresh random inputs, several distributions, poisoned outputs)")
    lines.append(f"- timed at: {timing}")
    return "\n".join(lines)


@dataclass
class Features:
    kernel: str  # the spec's kernel (a pipeline's name for several launches)
    kernels: list[str]  # the launched kernels, in order
    path: str
    source: str
    spec: Spec
    hardware: Hardware | None
    profile: Profile | None = None

    @property
    def launch_lines(self) -> list[str]:
        lines = self.source.splitlines()
        if self.spec.is_entry:  # the entry's own launches, as its host code writes them
            fn = host_code(self.source).function(self.spec.entry or self.kernel)
            if fn is None:
                return []
            return [
                f"- line {x.line}: `{x.written}` {x.kind}, grid {x.grid.describe()}, block {x.block.describe()}"
                + (f", {x.smem.describe()} B dynamic shared memory" if x.smem.text not in ("", "0") else "")
                for x in fn.launches
            ]
        d = parse_directives(self.source)
        return [lines[x.line - 1].strip() for x in d.launches if x.kernel in self.kernels]

    @property
    def tune_lines(self) -> list[str]:
        lines = self.source.splitlines()
        return [lines[t.line - 1].strip() for t in parse_directives(self.source).tunables]

    def sections(self) -> dict[str, str]:
        """Named text blocks for the prompt templates."""
        return {
            "kernel": self.kernel,
            "kernels": ", ".join(f"`{k}`" for k in self.kernels),
            "path": self.path,
            "source": self.source.rstrip(),
            "launch": "\n".join(self.launch_lines + self.tune_lines) or "(none)",
            "spec": describe_spec(self.spec),
            "hardware": self.hardware.render() if self.hardware else "- unknown",
            "profile": self.profile.render() if self.profile else "- not measured",
        }

    def render(self) -> str:
        s = self.sections()
        if self.spec.is_entry:
            fn = find_host_function(self.source, self.spec.entry or self.kernel)
            signature = f"`{fn.signature}`" if fn else "(not found)"
            return (
                f"## Entry `{s['kernel']}` (launches {s['kernels'] or 'no kernel it names'})\n\n"
                f"### Signature (keep it exactly)\n{signature}\n\n"
                f"### Launches in the entry\n{s['launch']}\n\n### Spec\n{s['spec']}\n\n"
                f"### Hardware\n{s['hardware']}\n\n### Profile\n{s['profile']}\n"
            )
        return (
            f"## Kernel `{s['kernel']}` ({s['kernels']})\n\n"
            f"### Launch\n{s['launch']}\n\n### Spec\n{s['spec']}\n\n"
            f"### Hardware\n{s['hardware']}\n\n### Profile\n{s['profile']}\n"
        )
