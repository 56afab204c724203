"""The tuner on launcher files shaped like the seed papers' benchmarks (tests/fixtures/launchers/:
a kernel and an `extern "C"` launcher each, fp32 and bf16), through the CLI as a user runs it:
`kernel-lsp optimize FILE --proposer tune`. Needs a GPU. Prints one row per file as it finishes:
the candidate offered and the verdict (its speedup and A/B interval, or why nothing was tuned).

    python benchmarks/tuner_launchers.py [--budget-s 20] [--gpus 0,1] [--files a.cu,b.cu]

With several GPUs, files run side by side, one per GPU at a time (CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue

REPO = Path(__file__).resolve().parents[1]
LAUNCHERS = REPO / "tests" / "fixtures" / "launchers"


def tune(path: Path, budget_s: float, gpu: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="klsp-tune-") as d:
        for suffix in (".cu", ".spec.py"):
            shutil.copy(path.with_suffix(suffix) if suffix == ".cu" else path.with_name(path.stem + suffix), d)
        target = Path(d) / path.name
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "KERNEL_LSP_NCU": "/nonexistent/ncu"}
        cmd = [
            sys.executable, "-m", "kernel_lsp", "optimize", str(target), "--proposer", "tune",
            "--budget-s", str(budget_s), "--no-cache", "--json", "-q", "--workspace", d,
        ]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=budget_s * 6 + 120)
        wall = time.perf_counter() - start
    row = {"file": path.name, "gpu": gpu, "wall_s": round(wall, 1), "exit": proc.returncode}
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["verdict"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return row
    row["verdict"] = " ".join(str(result.get("verdict", "")).split())[:300]
    row["accepted"] = result.get("accepted")
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--budget-s", type=float, default=20.0)
    p.add_argument("--gpus", default="0", help="GPU indices to spread files over")
    p.add_argument("--files", help="comma-separated names in tests/fixtures/launchers")
    p.add_argument("--json")
    args = p.parse_args()
    files = sorted(LAUNCHERS.glob("*.cu"))
    if args.files:
        files = [LAUNCHERS / f for f in args.files.split(",")]
    gpus: Queue[str] = Queue()
    for g in args.gpus.split(","):
        gpus.put(g)

    def one(path: Path) -> dict:
        gpu = gpus.get()
        try:
            row = tune(path, args.budget_s, gpu)
        finally:
            gpus.put(gpu)
        print(
            f"| {row['file']} | GPU {gpu} | {row['wall_s']} | {row.get('accepted') or '-'} | {row['verdict']} |",
            flush=True,
        )
        return row

    print(f"# tuner on {len(files)} launcher files, budget {args.budget_s:g} s each", flush=True)
    print("| file | GPU | wall s | offered | verdict |\n|---|---|---|---|---|", flush=True)
    with ThreadPoolExecutor(len(args.gpus.split(","))) as pool:
        rows = list(pool.map(one, files))
    offered = sum(1 for r in rows if r.get("accepted"))
    print(f"offered a speedup on {offered} of {len(rows)} files", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
