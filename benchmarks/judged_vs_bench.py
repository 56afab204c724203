"""The judged figure against the trusted one, on one GPU, from one run (issue 44): for each case of
benchmarks/judged_cases/ (a kernel + `extern "C"` launcher file, its faster rewrite, their entry
spec), each side timed as `kernel-lsp bench` times it (the plain worker, CUDA events; twice, for
bench's own spread between two runs) and judged as the optimizer judges it (a sandboxed
session's A/B: each side in a confined process of its own, on the judge's clock); then the null
entry, judged minus in-process: the judge's own share of a run. Results, and the protocol each
was measured on: benchmarks/results/gpu_h100_2026-12-06.md.

    python benchmarks/judged_vs_bench.py [--cases vadd_fp32,softmax_bf16 | --dtype fp32]
        [--budget 0.2] [--bench-runs 2] [--json FILE] [--fake] [--folder DIR]

A side's judged latency agrees when it is within the larger of 5% of bench's median, 2 us, and
bench's own spread between its runs; the judged A/B ratio likewise (5%, or the spread of bench's
ratio between runs). `--fake` runs the CPU launchers of judged_cases/fake/ on the fake GPU: the
whole road, with figures that say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from judged_rounds import last_clock

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "benchmarks" / "judged_cases"
SIDE_TOLERANCE = 0.05
ABSOLUTE_TOLERANCE_S = 2e-6
NULL_SHARE_S = 1e-6


def bench_median(session, path: Path, spec_text: str) -> float | None:
    """A side's median as `kernel-lsp bench` measures it (the plain worker's CUDA events)."""
    from kernel_lsp.gpu import check_file

    (check,) = check_file(session, str(path), spec_source=spec_text)
    if not check.ok or not check.timings:
        print(f"#   bench {path.name}: {check.message[:200]}", flush=True)
        return None
    return check.timings[-1].measurement.median_s


def within(
    judged: float, bench: list[float], relative: float = SIDE_TOLERANCE, absolute: float = 0.0
) -> bool:
    center = sum(bench) / len(bench)
    spread = max(bench) - min(bench)
    return abs(judged - center) <= max(relative * center, absolute, spread)


def us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}"


def one_case(plain, judged, name: str, folder: Path, runs: int) -> dict:
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.gpu import GpuCompareRequest

    original, rewrite = folder / f"{name}.cu", folder / f"{name}.rewrite.cu"
    spec_path = folder / f"{name}.spec.py"
    spec_text = spec_path.read_text()
    row: dict = {"case": name}
    row["bench_a"] = [bench_median(plain, original, spec_text) for _ in range(runs)]
    row["bench_b"] = [bench_median(plain, rewrite, spec_text) for _ in range(runs)]
    options = judged.compile_options_for_device(CompileOptions())
    base = judged.build_library(original.read_text(), str(original), options)
    # The rewrite runs judged as a candidate does (in its own confined process); it is this
    # benchmark's own file, so it is built as the user's code is (no fence to pass).
    candidate = judged.build_library(rewrite.read_text(), str(original), options)
    entry = name.removesuffix(".cu")
    start = time.perf_counter()
    ab = judged.compare(
        GpuCompareRequest(
            original.read_text(),
            rewrite.read_text(),
            str(original),
            kernel=entry,
            spec=str(spec_path),
            baseline_artifact=base,
            candidate_artifact=candidate,
        )
    )
    row["ab_s"] = time.perf_counter() - start
    row["clock"] = last_clock()
    if ab.error or ab.baseline is None or ab.candidate is None:
        row["error"] = ab.error or "; ".join(p.message for p in ab.problems) or "no figures"
        return row
    row["judged_a"], row["judged_b"] = ab.baseline.median_s, ab.candidate.median_s
    row["judged_ratio"], row["ci"] = ab.speedup, (ab.ci_low, ab.ci_high)
    row["n"] = ab.n
    if None in row["bench_a"] or None in row["bench_b"]:
        row["error"] = "bench failed"
        return row
    ratios = [a / b for a, b in zip(row["bench_a"], row["bench_b"], strict=True)]
    row["bench_ratio"] = ratios
    row["ok_a"] = within(row["judged_a"], row["bench_a"], absolute=ABSOLUTE_TOLERANCE_S)
    row["ok_b"] = within(row["judged_b"], row["bench_b"], absolute=ABSOLUTE_TOLERANCE_S)
    row["ok_ratio"] = within(row["judged_ratio"], ratios)
    return row


def null_share(plain, judged, folder: Path, runs: int) -> dict:
    """The null entry: in-process (bench's way) and judged (a sandboxed session's check)."""
    from kernel_lsp.gpu import check_file

    path = folder / "null_entry.cu"
    spec_text = (folder / "null_entry.spec.py").read_text()
    bench = [bench_median(plain, path, spec_text) for _ in range(runs)]
    (check,) = check_file(judged, str(path), spec_source=spec_text)
    judged_s = check.timings[-1].measurement.median_s if check.ok and check.timings else None
    if judged_s is None:
        print(f"#   judged null entry: {check.message[:200]}", flush=True)
    return {"bench": bench, "judged": judged_s, "clock": check.timings[-1].clock if check.timings else ""}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="", help="comma-separated case names (default: every one)")
    parser.add_argument("--dtype", default="", help="only the cases of this dtype (fp32 or bf16)")
    parser.add_argument("--budget", type=float, default=0.2, help="sampling seconds per timing")
    parser.add_argument("--bench-runs", type=int, default=2, help="bench runs per side (its own spread)")
    parser.add_argument("--json")
    parser.add_argument("--fake", action="store_true", help="the fake GPU and judged_cases/fake/")
    parser.add_argument("--folder", help="cases from this folder instead (with its own null_entry)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("KERNEL_LSP_NCU", "/nonexistent/ncu")  # no occupancy profiles here
    os.environ.setdefault("KERNEL_LSP_JUDGE_CLOCKS", str(Path(tempfile.mkdtemp()) / "clocks.txt"))
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.model import TimingSettings

    folder = Path(args.folder) if args.folder else CASES / "fake" if args.fake else CASES
    names = sorted(p.name.removesuffix(".rewrite.cu") for p in folder.glob("*.rewrite.cu"))
    if args.cases:
        wanted = args.cases.split(",")
        names = [n for n in names if n in wanted]
    if args.dtype:
        names = [n for n in names if n.endswith(f"_{args.dtype}")]
    timing = TimingSettings(budget_s=args.budget)
    rows = []
    with (
        GpuSession(timing=timing, fake=args.fake) as plain,
        GpuSession(timing=timing, fake=args.fake, sandboxed=True) as judged,
    ):
        assert plain.available and judged.available, (plain.reason, judged.reason)
        device = plain.device.name if plain.device else "?"
        print(f"device: {device}; judged in: {judged.backend.sandbox}", flush=True)
        print(
            "| case | bench A us (runs) | judged A us | A ok | bench B us (runs) | judged B us | B ok "
            "| bench A/B (runs) | judged A/B [ci] | A/B ok | A/B s |",
            flush=True,
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        for name in names:
            row = one_case(plain, judged, name, folder, args.bench_runs)
            rows.append(row)
            if "error" in row and "judged_a" not in row:
                print(f"| {name} | {row['error'][:200]} |", flush=True)
                continue
            bench_a = ", ".join(us(s) for s in row["bench_a"])
            bench_b = ", ".join(us(s) for s in row["bench_b"])
            ratios = ", ".join(f"{r:.3f}" for r in row.get("bench_ratio", []))
            ci = row["ci"]
            print(
                f"| {name} | {bench_a} | {us(row['judged_a'])} | {row.get('ok_a', '-')} | {bench_b} "
                f"| {us(row['judged_b'])} | {row.get('ok_b', '-')} | {ratios} "
                f"| {row['judged_ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] n={row['n']} | {row.get('ok_ratio', '-')} "
                f"| {row['ab_s']:.1f} |",
                flush=True,
            )
            print(f"#   {row['clock']}", flush=True)
        null = null_share(plain, judged, folder, args.bench_runs)
    share = None
    if null["judged"] is not None and None not in null["bench"]:
        share = null["judged"] - sum(null["bench"]) / len(null["bench"])
    print(
        f"null entry: bench {', '.join(us(s) for s in null['bench'])} us, judged {us(null['judged'])} us; "
        f"the judge's share of a run {us(share)} us (target: at most {NULL_SHARE_S * 1e6:g} us)",
        flush=True,
    )
    print(f"#   null entry's judged clock: {null['clock']}", flush=True)
    checked = [r for r in rows if "ok_a" in r]
    for key, what in (("ok_a", "originals"), ("ok_b", "rewrites"), ("ok_ratio", "A/B ratios")):
        good = sum(bool(r[key]) for r in checked)
        print(f"{what} within tolerance: {good} of {len(checked)}", flush=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"device": device, "rows": rows, "null": null, "share_s": share}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
