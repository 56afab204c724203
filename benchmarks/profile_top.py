"""The top of each cProfile stats file in a folder, by cumulative time: where a worker's (or a
driver's) seconds went. The worker writes its own with KERNEL_LSP_WORKER_PROFILE=DIR:

    KERNEL_LSP_WORKER_PROFILE=/tmp/prof python3 benchmarks/judge_cost.py --repeat 1
    python3 benchmarks/profile_top.py /tmp/prof [--lines 45]
"""

from __future__ import annotations

import argparse
import io
import pstats
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--lines", type=int, default=45)
    args = parser.parse_args()
    for path in sorted(Path(args.folder).glob("*.prof")):
        out = io.StringIO()
        pstats.Stats(str(path), stream=out).sort_stats("cumulative").print_stats(args.lines)
        text = out.getvalue()
        print(f"===== {path.name}")
        print(text[max(0, text.find("function calls") - 20) :])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
