"""The judge's gate against entries that rewrite their process's gated run (issue 44): the honest
vadd entry, one that opens the judge's `go` flag itself (its stream never waits), one that writes
`done` before its work, judged in a sandboxed session one after another, N rounds; each line the
verdict, the median and the clock's own account (brackets, floor, preparations counted long).

    python3 benchmarks/gate_attacks.py [ROUNDS]

Needs a GPU (tests/gpu/fixtures/judge/). Results: benchmarks/results/judged-gpu-clock-*.md."""

from __future__ import annotations

import sys
from pathlib import Path

from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings

ENTRIES = Path(__file__).resolve().parents[1] / "tests" / "gpu" / "fixtures" / "judge"


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    spec = (ENTRIES / "vadd_entry.spec.py").read_text()
    with GpuSession(launch_timeout_s=3.0, timing=TimingSettings(budget_s=0.2), sandboxed=True) as session:
        if not session.available:
            print(f"no GPU: {session.reason}")
            return 2
        for r in range(rounds):
            for name in ("honest", "gate_opens_go", "gate_done_early"):
                (result,) = check_file(session, str(ENTRIES / f"{name}.cu"), spec_source=spec)
                if result.ok:
                    t = result.timings[-1]
                    print(f"{r} {name}: right, {t.measurement.median_s * 1e6:.1f} us | {t.clock}", flush=True)
                else:
                    kind = result.problems[0].kind if result.problems else result.status
                    print(f"{r} {name}: {kind}: {result.message[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
