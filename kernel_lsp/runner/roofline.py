"""The roofline figures of one timed case, and when a time is too good to be true.

Two bounds: memory (the spec's `work` bytes, else the minimal bytes of its buffers, at the
measured memory bandwidth: the best of a copy and the stream kernels, kernel_lsp.runner.hardware)
and compute (the spec's `work` flops at the peak of the dtype it names,
measured where the device description measured it). A time below either bound is suspicious: the
kernel cannot have done the work. A figure over 100% of its bound is never a plain result: it
carries `over_bound`, and with a cold L2 (or on the compute bound, which no cache helps) it is
suspicious too.
"""

from __future__ import annotations

from typing import Any

from kernel_lsp.spec import Spec

SOL_MARGIN = 0.85  # below 85% of the minimal-bytes time: not even a perfect kernel gets there


def min_bytes(spec: Spec, nbytes: dict[str, int]) -> int:
    """What any correct kernel must move at least: each input read once, each output written."""
    total = 0
    for name, arg in spec.buffers().items():
        if arg.kind in ("in", "out"):
            total += nbytes[name]
        elif arg.kind == "inout":
            total += 2 * nbytes[name]
    return total


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us"


def figures(
    spec: Spec, sizes: dict[str, int], nbytes: dict[str, int], median: float, cold: bool, dev: dict[str, Any]
) -> dict[str, Any]:
    """The timing reply's figures for one case (see kernel_lsp.gpu.CaseTiming)."""
    notes = []
    try:
        work = spec.work_for(sizes)
    except Exception as e:  # the user's work function: its failure is a note, not a crash
        work = {}
        notes.append(f"the spec's work raised {type(e).__name__}: {e}")
    sol_bytes = min_bytes(spec, nbytes)
    moved = float(work.get("bytes", sol_bytes))
    flops = float(work.get("flops", 0.0))
    bandwidth = float(dev.get("memory_bandwidth_Bps") or dev.get("copy_bandwidth_Bps") or 0.0)
    peaks: dict[str, float] = dev.get("peak_flops") or {}
    out_dtypes = [a.dtype for a in spec.outputs().values()]
    flop_dtype = str(work.get("dtype", out_dtypes[0] if out_dtypes else "float32"))
    if flop_dtype not in peaks:
        flop_dtype = "float32"
    peak = float(peaks.get(flop_dtype, 0.0))
    source = (dev.get("peak_source") or {}).get(flop_dtype, "derived")
    t_mem = moved / bandwidth if bandwidth else 0.0
    t_flop = flops / peak if peak else 0.0
    bound_t, bound = (t_mem, "DRAM") if t_mem >= t_flop else (t_flop, f"{flop_dtype} peak")
    roofline = bound_t / median if median and bound_t else 0.0
    if not flops:
        notes.append("no compute bound known (the spec's work gives no flops)")
    if "bytes" not in work:
        notes.append(f"memory bound from the buffers' minimal bytes ({sol_bytes} bytes)")

    suspicious = None
    sol_t = min(moved, sol_bytes) / bandwidth if bandwidth else 0.0
    if cold and sol_t and median < SOL_MARGIN * sol_t:
        suspicious = (
            f"{_us(median)} is below the speed-of-light bound of {_us(sol_t)} "
            f"({min(moved, sol_bytes):.0f} bytes at the measured {bandwidth / 1e9:.0f} GB/s): "
            "the kernel cannot have done the work"
        )
    elif t_flop and median < t_flop:
        suspicious = (
            f"{_us(median)} is below the compute bound of {_us(t_flop)} ({flops:.4g} flops at the "
            f"{source} {flop_dtype} peak of {peak / 1e12:.1f} TFLOP/s): the kernel cannot have done "
            "the work"
        )
    elif roofline > 1.0 and (cold or bound != "DRAM"):
        suspicious = (
            f"{roofline:.0%} of the {bound} bound ({_us(median)} against {_us(bound_t)}): over 100% "
            "means the work was not done, or the spec's work overstates it"
        )
    over_bound = None
    if roofline > 1.0:
        over_bound = suspicious or (
            f"{roofline:.0%} of the {bound} bound with a warm L2: the data came from the cache"
        )
    return {
        "bytes": moved,
        "flops": flops,
        "bandwidth_Bps": moved / median if median else 0.0,
        "flops_per_s": flops / median if median else 0.0,
        "roofline": roofline,
        "bound": bound,
        "suspicious": suspicious,
        "over_bound": over_bound,
        "compute_bound": bool(t_flop),
        "bound_note": "; ".join(notes),
    }
