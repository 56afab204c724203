"""Do lanes change the timing figures? `kernel-lsp check PATH -v --specs run` on one GPU with one
lane (one worker on the GPU, as before issue 31) and with N lanes (N workers taking turns: timed
launches exclusive, runner/turns.py); each timed case's median side by side.

    python3 benchmarks/check_lanes_figures.py --lanes 4      # a GPU machine, about 4 minutes

Prints a markdown table (file, kernel, case, median ms and n per run, ratio) and the spread of
the ratios: with honest turns the medians agree within their own run-to-run noise.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `dot/dot_bf16.cu: kernel dot on GPU: verified on 7 case(s); n=33554432: 0.1860 ms (p10-p90 ..., n=15, cold L2), ...`
LINE = re.compile(r"^(\S+): kernel (\S+) on GPU: verified on \d+ case\(s\); (.*)$")
FIGURE = re.compile(r"([^;]+?): ([0-9.]+) ms \(p10-p90 [^,]+, n=(\d+)")


def figures(path: str, lanes: int, device: str, timeout_s: float) -> tuple[dict, float]:
    env = dict(os.environ, KERNEL_LSP_CHECK_LANES=str(lanes), CUDA_VISIBLE_DEVICES=device)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", path, "-v", "--specs", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    ).stdout
    found = {}
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        for case, ms, n in FIGURE.findall(m.group(3)):
            found[(m.group(1), m.group(2), case.strip())] = (float(ms), int(n))
    return found, time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--path", default="samples/")
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--device", default="0")
    p.add_argument("--timeout", type=float, default=200.0)
    args = p.parse_args()
    one, one_s = figures(args.path, 1, args.device, args.timeout)
    many, many_s = figures(args.path, args.lanes, args.device, args.timeout)
    print(
        f"# timing figures, 1 lane ({one_s:.0f} s) vs {args.lanes} lanes ({many_s:.0f} s), GPU {args.device}"
    )
    print(f"| file | kernel | case | 1 lane ms (n) | {args.lanes} lanes ms (n) | ratio |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for key in sorted(set(one) | set(many)):
        a, b = one.get(key), many.get(key)
        ratio = b[0] / a[0] if a and b and a[0] > 0 else float("nan")
        if a and b:
            ratios.append(ratio)
        cell = lambda f: f"{f[0]:.4f} ({f[1]})" if f else "-"  # noqa: E731
        print(f"| {key[0]} | {key[1]} | {key[2]} | {cell(a)} | {cell(b)} | {ratio:.3f} |")
    if ratios:
        print(
            f"\n{len(ratios)} cases: ratio median {statistics.median(ratios):.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
