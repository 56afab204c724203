"""What limits a kernel, from ncu's metrics: the speed-of-light figures, achieved occupancy, the top
warp stall reasons, shared-memory bank conflicts, sectors per global request, and a verdict.

The verdict follows Nsight Compute's own speed-of-light rule: a unit at or above 60% of its peak
is the limiter (memory-bound when the memory side is the busier, compute-bound otherwise); below
that on both sides the kernel is latency-bound (warps wait; the top stall says on what). A grid
that cannot fill the GPU, or a launch of a few microseconds, is launch-bound whatever the rest
says. Metrics an ncu version does not report are listed in `missing`; the verdict uses what is
there and says "unknown" when the speed-of-light figures themselves are missing.
"""

from __future__ import annotations

from kernel_lsp.gpu_reports import KernelProfile, Stall

BUSY_PCT = 60.0  # ncu's threshold for "this unit is the bottleneck"
LAUNCH_BOUND_S = 5e-6  # shorter kernels are dominated by launch and ramp-up

# (label, metric) in the order shown; all are % of peak.
SOL_METRICS = (
    ("DRAM", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L1/shared", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("SM", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
)
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
DURATION = "gpu__time_duration.sum"
GRID = "launch__grid_size"
SMS = "device__attribute_multiprocessor_count"
BANK_CONFLICTS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
)
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
SECTORS = {
    "load": (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    ),
    "store": (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    ),
}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
PIPE_PREFIX, PIPE_SUFFIX = "sm__inst_executed_pipe_", ".avg.pct_of_peak_sustained_active"

# Source-page column names (stall_long_sb) -> the raw page's reason names (long_scoreboard).
SOURCE_STALLS = {
    "long_sb": "long_scoreboard",
    "short_sb": "short_scoreboard",
    "lg": "lg_throttle",
    "mio": "mio_throttle",
    "math": "math_pipe_throttle",
    "tex": "tex_throttle",
    "imc": "imc_miss",
    "no_inst": "no_instruction",
    "dispatch": "dispatch_stall",
    "sleep": "sleeping",
}
NOT_A_STALL = {"selected"}  # the sample where the warp issued


def source_stall_reason(column: str) -> str:
    """`stall_long_sb` -> `long_scoreboard`."""
    short = column.removeprefix("stall_")
    return SOURCE_STALLS.get(short, short)


def kernel_profile(kernel: str, metrics: dict[str, float], case: str = "", top: int = 4) -> KernelProfile:
    """Read one kernel's raw-page metrics (base units: ns, counts, %)."""
    p = KernelProfile(kernel, case)

    def get(metric: str, what: str) -> float | None:
        value = metrics.get(metric)
        if value is None and what not in p.missing:
            p.missing.append(what)
        return value

    for label, metric in SOL_METRICS:
        value = get(metric, f"{label} throughput ({metric})")
        if value is not None:
            p.sol[label] = value
    p.memory_pct = get(MEMORY, f"memory throughput ({MEMORY})")
    p.compute_pct = get(COMPUTE, f"SM throughput ({COMPUTE})")
    pipes = {
        m[len(PIPE_PREFIX) : -len(PIPE_SUFFIX)]: v
        for m, v in metrics.items()
        if m.startswith(PIPE_PREFIX) and m.endswith(PIPE_SUFFIX)
    }
    if pipes:
        p.top_pipe, p.top_pipe_pct = max(pipes.items(), key=lambda kv: kv[1])
    achieved = get(ACHIEVED, f"achieved occupancy ({ACHIEVED})")
    theoretical = get(THEORETICAL, f"theoretical occupancy ({THEORETICAL})")
    p.achieved_occupancy = achieved / 100.0 if achieved is not None else None
    p.theoretical_occupancy = theoretical / 100.0 if theoretical is not None else None
    stalls = {
        m[len(STALL_PREFIX) : -len(STALL_SUFFIX)]: v
        for m, v in metrics.items()
        if m.startswith(STALL_PREFIX) and m.endswith(STALL_SUFFIX)
    }
    stalls = {r: v for r, v in stalls.items() if r not in NOT_A_STALL}
    total = sum(stalls.values())
    if not stalls:
        p.missing.append("warp stall reasons (WarpStateStats section)")
    elif total > 0:
        ranked = sorted(stalls.items(), key=lambda kv: -kv[1])[:top]
        p.stalls = [Stall(r, v, v / total) for r, v in ranked if v > 0]
    conflicts = [get(m, "shared-memory bank conflicts") for m in BANK_CONFLICTS]
    if all(c is not None for c in conflicts):
        p.bank_conflicts = int(sum(c for c in conflicts if c is not None))
    wavefronts = metrics.get(SHARED_WAVEFRONTS)
    p.shared_wavefronts = int(wavefronts) if wavefronts is not None else None
    for kind, (sectors, requests) in SECTORS.items():
        s, r = metrics.get(sectors), metrics.get(requests)
        if s is None or r is None:
            p.missing.append(f"global {kind} sectors per request")
        elif r > 0:
            p.sectors_per_request[kind] = s / r
    duration = get(DURATION, f"duration ({DURATION})")
    p.duration_s = duration * 1e-9 if duration is not None else None
    grid, sms = metrics.get(GRID), metrics.get(SMS)
    p.grid_blocks = int(grid) if grid is not None else None
    p.sm_count = int(sms) if sms is not None else None
    p.limiter, p.evidence = verdict(p)
    return p


def verdict(p: KernelProfile) -> tuple[str, str]:
    if p.grid_blocks is not None and p.sm_count and p.grid_blocks < p.sm_count:
        return "launch-bound", f"{p.grid_blocks} block(s) for {p.sm_count} SMs"
    if p.duration_s is not None and p.duration_s < LAUNCH_BOUND_S:
        return "launch-bound", f"{p.duration_s * 1e6:.1f} µs per launch"
    if p.memory_pct is None or p.compute_pct is None:
        return "unknown", "speed-of-light figures missing"
    memory_units = {k: v for k, v in p.sol.items() if k in ("DRAM", "L2", "L1/shared")}
    busiest = max(memory_units.items(), key=lambda kv: kv[1]) if memory_units else ("memory", p.memory_pct)
    if max(p.memory_pct, p.compute_pct) >= BUSY_PCT:
        if p.memory_pct >= p.compute_pct:
            return "memory-bound", f"{busiest[0]} at {busiest[1]:.0f}% of peak"
        pipe = f"; {p.top_pipe.upper()} pipe {p.top_pipe_pct:.0f}%" if p.top_pipe and p.top_pipe_pct else ""
        return "compute-bound", f"SM at {p.compute_pct:.0f}% of peak{pipe}"
    stall = f"; top stall {p.stalls[0].label}" if p.stalls else ""
    return (
        "latency-bound",
        f"SM {p.compute_pct:.0f}%, memory {p.memory_pct:.0f}% of peak (both < {BUSY_PCT:.0f}%){stall}",
    )
