"""The tuner against exhaustive search, on the samples with tunables (needs a GPU).

For each sample:
1. the tuner (hill climbing with restarts) runs live from an empty result cache: its evaluations,
   wall time, best configuration and speedup over the sample as written (check timing, then the
   interleaved A/B of the offered candidate);
2. exhaustive search over the same space (every configuration that can launch), sharing that cache:
   configurations the tuner already measured are not measured again, so both searches judge the
   same numbers; its cost is the sum of what each of its evaluations cost when first measured.

Kernel Tuner's own brute_force is not used: it is not installed on the GPU machine, and running it
(its cupy backend, its own timing) would measure every configuration a second time with another
method inside the shared device budget. The exhaustive search here covers exactly the same space
(the sample's `// kernel-lsp: tune` values, minus configurations that cannot launch) with the same
gates. Prints a table last; `--json FILE` writes the rows.

    python benchmarks/optimize.py [--samples spmv_csr_fp32,vector_add_fp32] [--deadline 240]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp.config import Settings  # noqa: E402
from kernel_lsp.optimizer.model import RunResult, Status  # noqa: E402
from kernel_lsp.optimizer.session import RunRequest, run  # noqa: E402

# (sample file, kernel), the most promising first: the deadline may cut the list short.
SAMPLES = [
    ("spmv_csr/spmv_csr_fp32.cu", "spmv_csr"),
    ("silu_and_mul/silu_and_mul_fp32.cu", "silu_and_mul"),
    ("reduce_sum/reduce_sum_fp32.cu", "reduce_sum"),
    ("transpose/transpose_fp32.cu", "transpose"),
    ("stencil2d/stencil2d_fp32.cu", "stencil2d"),
    ("rope/rope_fp32.cu", "rope"),
    ("vector_add/vector_add_fp32.cu", "vector_add"),
    ("softmax/softmax_fp32.cu", "softmax"),
    ("dot/dot_fp32.cu", "dot"),
]


def _evaluated(result: RunResult) -> list:
    return [o for o in result.outcomes if o.status is not Status.DUPLICATE]


def _best(result: RunResult) -> tuple[str, float | None, float | None]:
    b = result.best
    if b is None:
        return "-", None, None
    return b.note or "-", b.latency_s, b.speedup


def bench_sample(rel: str, kernel: str, session, deadline: float, workspace: str) -> dict:
    path = str(REPO / "samples" / rel)
    cache = tempfile.mkdtemp(prefix="klsp-bench-cache-")
    common = dict(
        path=path, kernel=kernel, settings=Settings(), proposer="tune", cache_dir=cache, workspace=workspace
    )
    # The tuner runs to the end of its own search (no time budget: a cut-short search would not
    # be a fair comparison); the deadline only limits the exhaustive search after it.
    t0 = time.perf_counter()
    tuned = run(RunRequest(**common, strategy="hill_climb"), session=session)
    tuner_wall = time.perf_counter() - t0
    left = max(10.0, deadline - time.monotonic())
    t0 = time.perf_counter()
    brute = run(
        RunRequest(**common, strategy="brute_force", time_budget_s=left, write_report=False), session=session
    )
    brute_wall = time.perf_counter() - t0
    brute_evals = _evaluated(brute)
    space = brute.settings.get("space_size")
    finished = brute.stop_reason.startswith("the proposer has nothing more")
    t_note, t_lat, t_speed = _best(tuned)
    b_note, b_lat, b_speed = _best(brute)
    c = tuned.comparison
    return {
        "sample": rel,
        "device": tuned.device,
        "space": space,
        "tuner_evals": len(_evaluated(tuned)),
        "tuner_wall_s": tuner_wall,
        "tuner_best": t_note,
        "tuner_best_latency_s": t_lat,
        "tuner_speedup": t_speed,
        "tuner_ab": [c.speedup, c.ci_low, c.ci_high, c.samples] if c else None,
        "offered": tuned.accepted is not None,
        "verdict": tuned.verdict,
        "brute_evals": len(brute_evals),
        "brute_complete": finished,
        # Every evaluation's first-measurement cost (the tuner's share came from the cache).
        "brute_cost_s": sum(o.cost_s for o in brute_evals) + brute.baseline.cost_s,
        "brute_wall_s": brute_wall,
        "brute_best": b_note,
        "brute_best_latency_s": b_lat,
        "brute_speedup": b_speed,
        "same_best": t_note == b_note
        or bool(t_lat and b_lat and t_lat <= b_lat * 1.01),  # within 1 %: a tie in timing noise
    }


def table(rows: list[dict]) -> str:
    head = (
        f"{'sample':34s} {'space':>5s} | {'tuner evals':>11s} {'wall s':>7s} {'best (tuner)':24s} {'speedup':>7s} {'A/B [95% CI]':>22s}"
        f" | {'brute evals':>11s} {'cost s':>7s} {'best (exhaustive)':24s} {'speedup':>7s} | same best"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        ab = r["tuner_ab"]
        ab_text = f"{ab[0]:.3f} [{ab[1]:.3f},{ab[2]:.3f}]" if ab else "-"
        lines.append(
            f"{r['sample']:34s} {r['space'] or 0:5d} | {r['tuner_evals']:11d} {r['tuner_wall_s']:7.1f} {r['tuner_best'][:24]:24s} "
            f"{(r['tuner_speedup'] or 0):6.2f}x {ab_text:>22s} | {r['brute_evals']:>10d}{'' if r['brute_complete'] else '*'} "
            f"{r['brute_cost_s']:7.1f} {r['brute_best'][:24]:24s} {(r['brute_speedup'] or 0):6.2f}x | {'yes' if r['same_best'] else 'NO'}"
        )
    lines.append(
        "speedup: over the sample as written (check timing); A/B: the offered candidate, interleaved, cold L2."
    )
    lines.append("* exhaustive search cut short by the deadline.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", help="comma-separated sample stems (e.g. spmv_csr_fp32)")
    p.add_argument("--deadline", type=float, default=300.0, help="seconds for the whole benchmark")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    from kernel_lsp.gpu import GpuSession

    session = GpuSession()
    if not session.available:
        print(f"no GPU: {session.reason}")
        return 2
    chosen = SAMPLES
    if args.samples:
        want = set(args.samples.split(","))
        chosen = [s for s in SAMPLES if Path(s[0]).stem in want]
    deadline = time.monotonic() + args.deadline
    workspace = tempfile.mkdtemp(prefix="klsp-bench-")
    rows = []
    for rel, kernel in chosen:
        if time.monotonic() > deadline - 20:
            print(f"deadline: skipping {rel} and the rest", flush=True)
            break
        per_sample = time.monotonic() + max(
            20.0, (deadline - time.monotonic()) / max(1, len(chosen) - len(rows))
        )
        row = bench_sample(rel, kernel, session, min(per_sample * 1.5, deadline), workspace)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    session.close()
    print(
        f"\ndevice: {rows[0]['device'] if rows else '?'}; reports under {os.path.join(workspace, '.kernel-lsp', 'reports')}"
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
