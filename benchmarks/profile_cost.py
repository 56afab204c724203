"""What a profile costs: wall seconds of the ncu run per kernel (issue 15), against the profiled
process alone. The profile runs after the verdict is published, off the timing path; this is how
long the hover waits for its "what limits it" table.

    python benchmarks/profile_cost.py [-n 3] [samples/gemm/gemm_fp32.cu ...]   # on a GPU with ncu
    python benchmarks/profile_cost.py --recorded tests/fixtures/ncu/timings.json

Live: each sample is verified once, then profiled n times, each time in a fresh GpuSession (no
cache), and the median, min-max and n printed. --recorded prints the one-shot table that
benchmarks/record_ncu.py measured on the device (n=1 per column).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT = [
    "samples/reduce_sum/reduce_sum_fp32.cu",
    "samples/stencil2d/stencil2d_fp32.cu",
    "samples/gemm/gemm_fp32.cu",
]


def table(head: list[str], rows: list[list[str]]) -> None:
    from kernel_lsp.cli.bench import print_table

    print_table(head, rows, sys.stdout)


def recorded(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    rows = []
    for name, e in doc["samples"].items():

        def wall(key: str, e: dict = e) -> str:
            return f"{e[key]['wall_s']:.2f}" if key in e else "-"

        rows.append(
            [
                name,
                e.get("case", ""),
                e.get("headline", ""),
                wall("bare"),
                wall("minimal"),
                wall("sections"),
                wall("full"),
                "1",
            ]
        )
    table(
        ["sample", "case", "timing", "process s", "occupancy-only s", "profile s", "--set full s", "n"], rows
    )
    return 0


def live(paths: list[str], n: int) -> int:
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.runner.profile import find_ncu
    from kernel_lsp.spec import load_specs, spec_path_for

    if find_ncu() is None:
        print("no ncu here", file=sys.stderr)
        return 2
    rows = []
    device = ""
    for rel in paths:
        path = os.path.join(ROOT, rel) if not os.path.isabs(rel) else rel
        with open(path, encoding="utf-8") as f:
            source = f.read()
        loaded = load_specs(spec_path_for(path))
        spec = loaded.specs[0]
        walls, limiter = [], ""
        for _ in range(n):
            with GpuSession() as gpu:
                device = gpu.device.name if gpu.device else "?"
                check = gpu.check(source, path, loaded, spec.kernel)
                if not check.ok:
                    print(f"{rel}: {check.message}", file=sys.stderr)
                    break
                t0 = time.perf_counter()
                gpu.add_occupancy(check, source, path, loaded)
                walls.append(time.perf_counter() - t0)
                if check.profile and check.profile.kernels:
                    limiter = "; ".join(f"{k.kernel}: {k.limiter}" for k in check.profile.kernels)
                else:
                    limiter = check.profile.note if check.profile else "-"
        if walls:
            rows.append(
                [
                    os.path.basename(rel),
                    str(len(spec.kernels)),
                    f"{statistics.median(walls):.2f}",
                    f"{min(walls):.2f}-{max(walls):.2f}",
                    str(len(walls)),
                    limiter,
                ]
            )
    table(["sample", "kernels", "median s", "min-max s", "n", "limiter"], rows)
    print(f"device: {device}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("samples", nargs="*", default=DEFAULT)
    p.add_argument("-n", type=int, default=3, help="profiling runs per sample")
    p.add_argument("--recorded", help="print the table of a record_ncu.py timings.json instead")
    args = p.parse_args(argv)
    return recorded(args.recorded) if args.recorded else live(args.samples, args.n)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
