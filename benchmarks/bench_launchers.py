"""`kernel-lsp bench` on launcher files (issue 31: before entry specs were built, bench failed on
every one with "an entry spec runs a shared library"): each kernel + `extern "C"` launcher file
of tests/fixtures/launchers and tests/fixtures/launchers_heldout (fp32, bf16, int; each with its
hand-written entry spec) benched as a user would, `kernel-lsp bench FILE --json`, in its own
process. One row per file as it finishes: exit code, the kernels the entry launched (with their
share of the time where ncu measured it), the largest case's median, the device.

    python3 benchmarks/bench_launchers.py [--budget 0.2] [--timeout 180] [--no-occupancy]

On a machine without a GPU every row says why nothing ran (exit 2).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = [REPO / "tests" / "fixtures" / "launchers", REPO / "tests" / "fixtures" / "launchers_heldout"]


def bench(path: Path, budget: float, timeout: float, occupancy: bool) -> tuple[int, dict | str, float]:
    cmd = [
        sys.executable,
        "-c",
        "import sys; from kernel_lsp.cli import main; sys.exit(main())",
        "bench",
        str(path),
        "--json",
        "--budget",
        str(budget),
    ]
    if not occupancy:
        cmd.append("--no-occupancy")
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"not done in {timeout:g} s", time.perf_counter() - start
    wall = time.perf_counter() - start
    try:
        return done.returncode, json.loads(done.stdout), wall
    except json.JSONDecodeError:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return done.returncode, lines[-1] if lines else "no output", wall


def describe(doc: dict | str) -> tuple[str, str, str]:
    """(kernels launched, the largest case's median, the device or why not)."""
    if isinstance(doc, str):
        return "-", "-", doc[:120]
    if doc.get("error"):
        return "-", "-", str(doc["error"])[:120]
    checks = [c for c in doc.get("checks", []) if c.get("entry")]
    if not checks:
        return "-", "-", "no entry check"
    check = checks[0]
    kernels = ", ".join(
        f"{k['kernel']}" + (f" {k['share'] * 100:.0f}%" if k.get("share") is not None else "")
        for k in check.get("kernels", [])
    )
    timings = check.get("timings") or []
    median = "-"
    if timings:
        last = timings[-1]
        median = f"{last['case']}: {last['median_s'] * 1e6:.1f} us (n={last['n']})"
    status = "ok" if check.get("ok") else f"{check.get('status')}: {(check.get('message') or '')[:80]}"
    return kernels or "-", median, f"{doc.get('device')} ({status})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=0.2, help="bench's sampling seconds per case")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per file")
    parser.add_argument("--no-occupancy", action="store_true", help="no ncu (no kernel shares)")
    args = parser.parse_args()
    files = sorted(p for folder in FOLDERS for p in folder.glob("*.cu") if p.with_suffix(".spec.py").exists())
    print("| file | exit | s | kernels launched (share) | largest case | device (verdict) |", flush=True)
    print("|---|---|---|---|---|---|", flush=True)
    ok = 0
    for path in files:
        code, doc, wall = bench(path, args.budget, args.timeout, not args.no_occupancy)
        kernels, median, device = describe(doc)
        ok += code == 0
        print(
            f"| {path.parent.name}/{path.name} | {code} | {wall:.1f} | {kernels} | {median} | {device} |",
            flush=True,
        )
    print(f"\n{ok} of {len(files)} launcher files benched (exit 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
