"""What the judge's boundary costs an optimize round (needs a GPU): one FSR round per entry
sample with LLM-style whole-file answers (tests/fixtures/entry_rewrites/, through a scripted LLM),
every gate real (fence, nvcc, verification, timing, A/B, compute-sanitizer where installed),
profiles off. Prints one row per sample as it is measured: the round's wall time, the verdict of
each answer, the accepted speedup and the A/B interval.

Run it on two trees side by side on the same GPU to compare (the tree under test is the one
imported: `--tree DIR` puts another checkout first on sys.path, e.g. an older commit unpacked
with `git archive`):

    python benchmarks/judge_cost.py [--tree DIR] [--repeat 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ROUNDS = {
    "layernorm_fp32": ["fused", "race"],
    "vector_add_bf16": ["kernel_only", "off_by_one"],
    "l2_normalize_coop": ["two_kernels", "coop_variant"],
}


def one_round(session, sample: str, answers: list[str], workdir: Path):
    from scripted_llm import rewrite, scripted_round

    from kernel_lsp.spec import load_specs

    for suffix in (".cu", ".spec.py"):
        shutil.copy(REPO / "samples" / "entries" / f"{sample}{suffix}", workdir / f"{sample}{suffix}")
    spec = load_specs(str(workdir / f"{sample}.spec.py")).specs[0]
    texts = [rewrite(f"{sample}.{a}") for a in answers]
    start = time.perf_counter()
    result = scripted_round(session, str(workdir / f"{sample}.cu"), spec.kernel, texts, str(workdir))
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", default=str(REPO), help="the checkout whose kernel_lsp is measured")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--samples", default=",".join(ROUNDS), help="which rounds (default: all three)")
    args = parser.parse_args()
    sys.path[:0] = [os.path.abspath(args.tree), str(REPO / "tests")]
    os.environ.setdefault("KERNEL_LSP_NCU", "/nonexistent/ncu")  # profiles are not the question
    # Each judged timing's clock (batch size, request and copy times, figure/new-inputs ratios), printed
    # as `#` lines under its row (runner/worker._note_clock; ignored by trees that lack it).
    clocks = Path(tempfile.mkdtemp(prefix="klsp-judge-clocks-")) / "clocks.txt"
    os.environ["KERNEL_LSP_JUDGE_CLOCKS"] = str(clocks)

    import kernel_lsp
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.model import TimingSettings

    print(f"tree: {os.path.dirname(os.path.dirname(os.path.abspath(kernel_lsp.__file__)))}", flush=True)
    rows = []
    with GpuSession(timing=TimingSettings(budget_s=0.2)) as session:
        assert session.available, session.reason
        device = session.device.name if session.device else "?"
        print(f"device: {device}", flush=True)
        print("| sample | round s (median of runs) | runs | verdicts | accepted | A/B [ci] |", flush=True)
        print("|---|---|---|---|---|---|", flush=True)
        for sample, answers in ((s, ROUNDS[s]) for s in args.samples.split(",")):
            walls, result = [], None
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory(prefix="klsp-judge-cost-") as d:
                    wall, result = one_round(session, sample, answers, Path(d))
                    walls.append(wall)
            assert result is not None
            verdicts = (
                ", ".join(f"{a}:{o.status.value}" for a, o in zip(answers, result.outcomes, strict=False))
                or f"none ({result.stop_reason}: {result.verdict[:300]})"
            )  # a round that stopped early says why
            accepted = (
                f"{result.accepted.speedup:.2f}x" if result.accepted and result.accepted.speedup else "-"
            )
            c = result.comparison
            ab = (
                f"{c.speedup:.2f} [{c.ci_low:.2f}, {c.ci_high:.2f}] n={getattr(c, 'n', getattr(c, 'samples', '?'))}"
                if c
                else "-"
            )
            row = {
                "sample": sample,
                "round_s": statistics.median(walls),
                "walls": walls,
                "verdicts": verdicts,
                "accepted": accepted,
                "ab": ab,
                "sandbox": result.sandbox,
            }
            rows.append(row)
            print(
                f"| {sample} | {row['round_s']:.1f} | {len(walls)} | {verdicts} | {accepted} | {ab} |",
                flush=True,
            )
            if clocks.exists():  # this round's clocks, then a fresh file for the next
                for line in clocks.read_text().splitlines():
                    print(f"#   {line}", flush=True)
                clocks.unlink()
    print(
        f"total (medians): {sum(r['round_s'] for r in rows):.1f} s; sandbox: {rows[-1]['sandbox']}",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
