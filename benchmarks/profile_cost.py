"""What a profile costs: wall seconds of the ncu run per kernel (issue 15), against the profiled
process alone. The profile runs after the verdict is published, off the timing path; this is how
long the hover waits for its "what limits it" table.

    python benchmarks/profile_cost.py [-n 3] [--concurrent 2] [samples/gemm/gemm_fp32.cu ...]   # GPU + ncu
    python benchmarks/profile_cost.py --recorded tests/fixtures/ncu/timings.json

Live: each sample is verified once, then profiled n times, each time in a fresh GpuSession (no
cache), and the median, min-max and n printed, with the two parts of a run: ncu collecting
(the launch replayed per section pass) and the printing of the report's pages. --concurrent K
then starts K profiles of the same job at once (as separate editors or test workers would) and
prints their wall time against one alone: kernel-lsp lets one ncu collect at a time on a
machine (runner/profile.py), so this is what the queue costs.
--recorded prints the one-shot table that benchmarks/record_ncu.py measured on the device (n=1
per column).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

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


class PhaseClock:
    """Seconds of each ncu command of a profile, by part: collecting (`-o`) or printing a page."""

    def __init__(self):
        from kernel_lsp.runner import profile

        self.module, self.real = profile, profile._run
        self.seconds: dict[str, list[float]] = {}

    def __enter__(self) -> PhaseClock:
        def timed(cmd, timeout_s, env=None, runs=None):
            t0 = time.perf_counter()
            try:
                return self.real(cmd, timeout_s, env, runs)
            finally:
                part = "collect" if "-o" in cmd else "pages"
                self.seconds.setdefault(part, []).append(time.perf_counter() - t0)

        self.module._run = timed
        return self

    def __exit__(self, *exc) -> None:
        self.module._run = self.real


def live(paths: list[str], n: int, concurrent: int) -> int:
    from kernel_lsp.gpu import GpuCheckRequest, GpuSession
    from kernel_lsp.runner.profile import find_ncu, profile_kernels
    from kernel_lsp.spec import load_specs, spec_path_for

    if find_ncu() is None:
        print("no ncu here", file=sys.stderr)
        return 2
    rows, together = [], []
    device = ""
    for rel in paths:
        path = os.path.join(ROOT, rel) if not os.path.isabs(rel) else rel
        with open(path, encoding="utf-8") as f:
            source = f.read()
        loaded = load_specs(spec_path_for(path))
        spec = loaded.specs[0]
        walls, collect, pages, limiter, args = [], [], [], "", None
        for _ in range(n):
            with GpuSession() as gpu:
                device = gpu.device.name if gpu.device else "?"
                request = GpuCheckRequest(source, path, kernel=spec.kernel, spec=loaded)
                check = gpu.check(request)
                if not check.ok:
                    print(f"{rel}: {check.message}", file=sys.stderr)
                    break
                real_profile = gpu.backend.profile

                def keep(*a, real_profile=real_profile):
                    nonlocal args
                    args = a
                    return real_profile(*a)

                gpu.backend.profile = keep
                with PhaseClock() as clock:
                    t0 = time.perf_counter()
                    gpu.add_occupancy(check, request)
                    walls.append(time.perf_counter() - t0)
                collect += clock.seconds.get("collect", [])
                pages.append(sum(clock.seconds.get("pages", [])))
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
                    f"{statistics.median(collect):.2f}" if collect else "-",
                    f"{statistics.median(pages):.2f}",
                    str(len(walls)),
                    limiter,
                ]
            )
        if walls and args and concurrent > 1:
            ncu, job, cubin, names, main_path, main_text = args
            job = dict(job, device=0)
            t0 = time.perf_counter()
            with ThreadPoolExecutor(concurrent) as pool:
                runs = [
                    pool.submit(profile_kernels, ncu, job, cubin, names, main_path, main_text=main_text)
                    for _ in range(concurrent)
                ]
                reports = [r.result() for r in runs]
            wall = time.perf_counter() - t0
            ok = sum(1 for r in reports if r.kernels)
            alone = statistics.median(walls)
            together.append(
                [
                    os.path.basename(rel),
                    f"{alone:.2f}",
                    str(concurrent),
                    f"{wall:.2f}",
                    f"{wall / alone:.2f}",
                    f"{ok}/{concurrent}",
                ]
            )
    table(["sample", "kernels", "median s", "min-max s", "collect s", "pages s", "n", "limiter"], rows)
    if together:
        print()
        table(["sample", "one alone s", "at once", "wall s", "ratio", "with figures"], together)
    print(f"device: {device}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("samples", nargs="*", default=DEFAULT)
    p.add_argument("-n", type=int, default=3, help="profiling runs per sample")
    p.add_argument("--concurrent", type=int, default=0, help="then K profiles of one job at once")
    p.add_argument("--recorded", help="print the table of a record_ncu.py timings.json instead")
    args = p.parse_args(argv)
    return recorded(args.recorded) if args.recorded else live(args.samples, args.n, args.concurrent)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
