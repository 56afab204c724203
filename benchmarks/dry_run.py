"""What the CPU dry run adds to a check: for each spec of samples/ and the spec corpus, the time to
load it (what every check did already) and the time of its dry run, medians of several rounds
measured side by side in one process.

    python benchmarks/dry_run.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp.spec import load_specs  # noqa: E402
from kernel_lsp.spec.dry_run import dry_cases, dry_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    files = sorted((REPO / "samples").rglob("*.spec.py")) + sorted(
        (REPO / "tests/fixtures/spec_corpus").rglob("*.spec.py")
    )
    rows = []
    for path in files:
        loads, runs = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            loaded = load_specs(str(path))
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            for spec in loaded.specs:
                dry_run(spec)
            runs.append(time.perf_counter() - start)
        cases = sum(len(dry_cases(s)) for s in loaded.specs)
        rows.append((path.relative_to(REPO), cases, statistics.median(loads), statistics.median(runs)))
    width = max(len(str(r[0])) for r in rows)
    print(f"{'spec':{width}}  cases  load ms  dry run ms")
    for name, cases, load, run in rows:
        print(f"{name!s:{width}}  {cases:5}  {load * 1e3:7.1f}  {run * 1e3:10.1f}")
    loads = [r[2] for r in rows]
    runs = [r[3] for r in rows]
    print(
        f"{len(rows)} specs: dry run median {statistics.median(runs) * 1e3:.1f} ms (max {max(runs) * 1e3:.0f} ms), "
        f"load median {statistics.median(loads) * 1e3:.1f} ms; dry run / load {statistics.median(runs) / statistics.median(loads):.2f}x median"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
