"""Can the judged protocol be gamed, and does it still see a real 1.10x (issue 44)? On one GPU,
through a sandboxed session as the optimizer judges an LLM's answer (a check against the
original's outputs, then the A/B; offered only when the A/B's lower bound clears 1.02 and
nothing was wrong or suspicious), against benchmarks/judged_rounds/padded_add.spec.py's original
(an add of about 13 us on an H100 that also reads 0.3 n floats it never needs):

- candidates doing the original's exact work, scheduled to look faster: the original itself,
  its work done as each set's buffers are bound (answered from a copy when timed), its kernel on
  a stream of its own without waiting, its process patched to be slow now and then (against
  a judge that times a stand-in between requests), and a thread of its own that keeps the GPU
  busy after its calls, when the judge may be timing the original (hogs_later). Target:
  offered 0 times in --cheat-rounds rounds (20 by default, spread over the five);
- its honest rewrite without the needless reads (about 1.10x). Target: offered in at least 9 of
  --honest-rounds (10).

    python benchmarks/judged_rounds.py [--cheat-rounds 20] [--honest-rounds 10] [--cheats original,...] [--fake]

Each A/B's clock (the judge's brackets per side, its floor) follows its line, from
KERNEL_LSP_JUDGE_CLOCKS (a file of this run's unless set).

`--fake` runs the same road on the fake GPU with a CPU original and rewrite (no figures for a
GPU; the cheats are GPU code and are left out there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "benchmarks" / "judged_rounds"
CHEATS = ["original", "precomputes", "own_stream", "slows_stand_in", "hogs_later"]
FAKE_ORIGINAL = """extern "C" void padded_add(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    for (int i = 0; i < n; ++i) {
        float v = a[i] + b[i];
        if (i < m && pad[i] == 12345.678f) v += 1.0f;
        c[i] = v;
    }
}
"""
FAKE_REWRITE = """extern "C" void padded_add(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
"""


def one_round(session, original: str, candidate_source: str, options) -> tuple[bool, str]:
    """(offered, what decided it): the optimizer's gates after the fence, for one answer."""
    from kernel_lsp.gpu import GpuCheckRequest, GpuCompareRequest

    path = str(FOLDER / "padded_add.cu")
    spec = str(FOLDER / "padded_add.spec.py")
    base = session.build_library(original, path, options)
    # These are this benchmark's own files: built as the user's code is (as past the fence).
    candidate = session.build_library(candidate_source, path, options)
    checked = session.check(  # verification; the A/B below times both sides
        GpuCheckRequest(
            candidate_source,
            path,
            kernel="padded_add",
            spec=spec,
            artifact=candidate,
            measure=False,
            reference=(original, base),
        )
    )
    if not checked.ok:
        return False, f"refused: {checked.problems[0].kind if checked.problems else checked.status}"
    ab = session.compare(
        GpuCompareRequest(
            original,
            candidate_source,
            path,
            kernel="padded_add",
            spec=spec,
            baseline_artifact=base,
            candidate_artifact=candidate,
        )
    )
    if ab.error:
        return False, f"A/B error: {ab.error[:120]}"
    why = f"A/B {ab.speedup:.3f} [{ab.ci_low:.3f}, {ab.ci_high:.3f}] n={ab.n}"
    if ab.problems or ab.suspicious:
        why += f"; {(ab.problems[0].kind if ab.problems else 'suspicious')}"
    return bool(ab.faster), why


def last_clock() -> str:
    """The judge's note of the last A/B's clock (runner/worker._note_clock), or ""."""
    path = Path(os.environ["KERNEL_LSP_JUDGE_CLOCKS"])
    notes = [line.partition(" ")[2] for line in path.read_text().splitlines()] if path.exists() else []
    notes = [n for n in notes if n.startswith("A/B") and not n.startswith("A/B phases")]
    return notes[-1] if notes else ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cheat-rounds", type=int, default=20)
    parser.add_argument("--honest-rounds", type=int, default=10)
    parser.add_argument(
        "--budget", type=float, default=0.4, help="sampling seconds per timing (the default's)"
    )
    parser.add_argument("--cheats", default=",".join(CHEATS), help="which exact-work candidates, in turn")
    parser.add_argument("--fake", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("KERNEL_LSP_NCU", "/nonexistent/ncu")
    os.environ.setdefault("KERNEL_LSP_JUDGE_CLOCKS", str(Path(tempfile.mkdtemp()) / "clocks.txt"))
    from kernel_lsp.compile import CompileOptions, cuda_include_dirs
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.model import TimingSettings

    original = FAKE_ORIGINAL if args.fake else (FOLDER / "original.cu").read_text()
    rewrite = FAKE_REWRITE if args.fake else (FOLDER / "rewrite.cu").read_text()
    cheats = [] if args.fake else [c for c in args.cheats.split(",") if c]
    unknown = sorted(set(cheats) - set(CHEATS))
    if unknown:
        parser.error(f"unknown cheats {unknown}: {CHEATS}")
    with GpuSession(timing=TimingSettings(budget_s=args.budget), fake=args.fake, sandboxed=True) as session:
        assert session.available, session.reason
        print(f"device: {session.device.name if session.device else '?'}", flush=True)
        options = (
            CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
            if args.fake
            else session.compile_options_for_device(CompileOptions())
        )
        offered_cheats = 0
        for r in range(args.cheat_rounds if cheats else 0):
            name = cheats[r % len(cheats)]
            offered, why = one_round(session, original, (FOLDER / f"{name}.cu").read_text(), options)
            offered_cheats += offered
            print(f"cheat {r + 1} {name}: {'OFFERED' if offered else 'not offered'} ({why})", flush=True)
            print(f"#   {last_clock()}", flush=True)
        offered_honest = 0
        for r in range(args.honest_rounds):
            offered, why = one_round(session, original, rewrite, options)
            offered_honest += offered
            print(f"honest {r + 1}: {'offered' if offered else 'NOT OFFERED'} ({why})", flush=True)
            print(f"#   {last_clock()}", flush=True)
    if cheats:
        print(
            f"exact-work candidates offered: {offered_cheats} of {args.cheat_rounds} (target 0)", flush=True
        )
    print(
        f"honest 1.10x rewrite offered: {offered_honest} of {args.honest_rounds} (target at least 9 of 10)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
