"""A kernel profile (gpu_reports.ProfileReport) in words: the lines `kernel-lsp bench --profile`
prints, and the block the optimizer puts in its LLM prompt and report. The editor's markdown is in
kernel_lsp/server (it alone knows LSP); it reuses `kernel_line` and `stall_text`."""

from __future__ import annotations

from kernel_lsp.gpu_reports import HotLine, KernelProfile, ProfileReport
from kernel_lsp.stats import format_seconds


def sol_text(k: KernelProfile) -> str:
    """`DRAM 16% · L2 21% · L1/shared 87% · SM 79% · tensor 0% of peak`."""
    return " · ".join(f"{label} {pct:.0f}%" for label, pct in k.sol.items()) + " of peak" if k.sol else ""


def stall_text(k: KernelProfile, top: int = 3) -> str:
    """`short scoreboard 33%, long scoreboard 30%, barrier 17%` (shares of stalled warps)."""
    return ", ".join(f"{s.label} {s.share:.0%}" for s in k.stalls[:top])


def memory_text(k: KernelProfile) -> str:
    parts = []
    if k.bank_conflicts is not None:
        of = f" of {k.shared_wavefronts:,} shared wavefronts" if k.shared_wavefronts else ""
        parts.append(f"bank conflicts {k.bank_conflicts:,}{of}")
    for kind, sectors in k.sectors_per_request.items():
        parts.append(f"global {kind} {sectors:.1f} sectors/request")
    return ", ".join(parts)


def kernel_line(k: KernelProfile) -> str:
    """`reduce_sum_partial: memory-bound (L1/shared at 87% of peak)`."""
    return f"{k.kernel}: {k.headline}"


def hot_line_text(h: HotLine, with_kernel: bool = False) -> str:
    who = f"{h.kernel} " if with_kernel else ""
    return f"{who}line {h.line}: {h.summary} | {h.text}"


def profile_lines(report: ProfileReport, hot: int = 5) -> list[str]:
    """The profile as indented text lines (bench, --check text, optimizer report)."""
    if not report.kernels:
        return [f"profile: {report.note or 'none'}"]
    out = []
    for k in report.kernels:
        out.append(f"profile {kernel_line(k)}" + (f" [{report.case}]" if report.case else ""))
        if k.duration_s is not None:  # a host entry's kernels: the time of each one it launched
            out.append(f"  time under ncu: {format_seconds(k.duration_s)} (one launch, cold caches)")
        if k.sol:
            out.append(f"  speed of light: {sol_text(k)}")
        if k.achieved_occupancy is not None:
            theo = f" of theoretical {k.theoretical_occupancy:.0%}" if k.theoretical_occupancy else ""
            out.append(f"  achieved occupancy {k.achieved_occupancy:.0%}{theo}")
        if k.stalls:
            out.append(f"  top stalls: {stall_text(k)}")
        memory = memory_text(k)
        if memory:
            out.append(f"  memory: {memory}")
        lines = [h for h in report.hot_lines if h.kernel == k.kernel][:hot]
        for h in lines:
            out.append(f"  {hot_line_text(h)}")
    if report.missing:
        out.append(f"  not reported by this ncu: {', '.join(report.missing)}")
    if report.note:
        out.append(f"  note: {report.note}")
    out.append(f"  (profiling run {report.wall_s:.1f} s)")
    return out
