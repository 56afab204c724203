"""Several GPUs of one node against one (needs a GPU; two or more to show a speedup).

1. `--check` GPU verification of every spec'd sample file: `--gpus 1` then `--gpus all`, the
   same verdicts expected; wall time of the verification part (compiling for the device,
   verifying, timing).
2. A tuner run on one sample, 1 GPU then all: the same accepted configuration expected (timing
   noise may pick another near-equal one: the table says so); wall time of the whole run.

Each configuration runs `--repeat` times; the table shows the median wall time, the spread
(min-max) and n, and the ratio of the medians.

    python benchmarks/scaling.py [--repeat 3] [--sample vector_add/vector_add_fp32.cu:vector_add]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp.check import check_path, collect_files  # noqa: E402
from kernel_lsp.config import Settings  # noqa: E402
from kernel_lsp.evaluation.pool import visible_gpu_count  # noqa: E402
from kernel_lsp.gpu_check import verify_checks  # noqa: E402
from optimizer.session import RunRequest, run  # noqa: E402


def check_samples(settings: Settings, gpus: str) -> tuple[float, list[tuple[str, str, str]]]:
    files, _ = collect_files([str(REPO / "samples")], settings.exclude)
    checks = [check_path(f, settings) for f in files]
    start = time.perf_counter()
    verify_checks(checks, settings, log=lambda _line: None, gpus=gpus, progress=lambda _line: None)
    wall = time.perf_counter() - start
    verdicts = [(Path(c.path).name, k.kernel, k.status) for c in checks for k in c.gpu_checks]
    return wall, verdicts


def tune(settings: Settings, sample: str, kernel: str, gpus: str) -> tuple[float, str]:
    req = RunRequest(
        str(REPO / "samples" / sample),
        kernel,
        settings=replace(settings, gpu_devices=gpus),
        proposer="tune",
        use_cache=False,
        write_report=False,
        time_budget_s=120.0,
    )
    start = time.perf_counter()
    result = run(req)
    wall = time.perf_counter() - start
    accepted = result.accepted
    return wall, (str(accepted.config) if accepted is not None else f"nothing ({result.verdict[:60]})")


def row(label: str, gpus: str, walls: list[float], same: str) -> list[str]:
    return [
        label,
        gpus,
        f"{statistics.median(walls):.2f} s",
        f"{min(walls):.2f}-{max(walls):.2f} s",
        str(len(walls)),
        same,
    ]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sample", default="vector_add/vector_add_fp32.cu:vector_add", help="FILE:KERNEL")
    p.add_argument("--no-tune", action="store_true")
    args = p.parse_args(argv)
    count = visible_gpu_count()
    if count == 0:
        print("scaling: no GPU visible", file=sys.stderr)
        return 2
    settings = Settings()
    rows: list[list[str]] = []
    medians: dict[tuple[str, str], float] = {}
    jobs = [("--check samples/", check_samples, ())]
    if not args.no_tune:
        sample, _, kernel = args.sample.partition(":")
        jobs.append((f"tune {Path(sample).name}", tune, (sample, kernel)))
    for label, fn, extra in jobs:
        results: dict[str, tuple[list[float], list[object]]] = {}
        for gpus in ("1", "all"):
            walls, outputs = [], []
            for _ in range(args.repeat):
                wall, output = fn(settings, *extra, gpus)
                walls.append(wall)
                outputs.append(output)
            results[gpus] = (walls, outputs)
            medians[(label, gpus)] = statistics.median(walls)
        first = results["1"][1][0]
        for gpus, (walls, outputs) in results.items():
            same = "same" if all(o == first for o in outputs) else "DIFFERENT"
            rows.append(row(label, "1" if gpus == "1" else f"all ({count})", walls, same))
        rows.append([label, "ratio", f"{medians[(label, '1')] / medians[(label, 'all')]:.2f}x", "", "", ""])
    head = ["work", "GPUs", "median wall", "min-max", "n", "result vs 1 GPU"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
