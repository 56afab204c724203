"""What the judge's protocol costs a run on the host, with no device work: a host launcher on the
fake GPU (its loop runs for real over host memory), timed plain (in the worker, as `check` times
the user's own code) and judged (in an accused process: requests over the socket pair, batches,
the judge's copy of the outputs), one after the other. The difference per run is what the
request, the batch loop and the syncs cost in Python and the kernel, never the GPU.

    python3 benchmarks/judged_protocol_fake.py [--request-s 0.004] [--n 1000]

The judged batch grows to --request-s worth of runs (KERNEL_LSP_JUDGE_REQUEST_S; the fake GPU's
default, 0, keeps three). Needs nvcc and g++ (the library is built) and the in-process sandbox.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

SPEC = """from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(
    entry="scale",
    sizes=[{{"n": {n}}}],
    args={{"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")}},
    reference=lambda x: {{"y": 2.0 * x}},
)
"""
SOURCE = 'extern "C" void scale(const float* x, float* y, int n) { for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }\n'


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--request-s", type=float, default=0.004)
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    os.environ["KERNEL_LSP_JUDGE_REQUEST_S"] = str(args.request_s)

    from kernel_lsp.compile import CompileOptions, cuda_include_dirs
    from kernel_lsp.gpu import GpuSession, check_file
    from kernel_lsp.runner.timing import TimingSettings

    timing = TimingSettings(warmup_s=0.05, budget_s=0.5, min_samples=30, max_samples=200)
    options = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
    folder = Path(tempfile.mkdtemp(prefix="klsp-protocol-"))
    (folder / "scale.cu").write_text(SOURCE)
    (folder / "scale.spec.py").write_text(SPEC.format(n=args.n))
    print(f"fake GPU, a host launcher over n={args.n} floats; judged batches grown to {args.request_s:g} s")
    print("| timed | median per run | samples | clock |")
    print("|---|---|---|---|")
    for sandboxed in (False, True):
        with GpuSession(fake=True, timing=timing, sandboxed=sandboxed) as session:
            (check,) = check_file(session, str(folder / "scale.cu"), compile_options=options)
            if not check.ok or not check.timings:
                print(f"| {'judged' if sandboxed else 'plain'} | - | - | {check.message[:200]} |")
                continue
            t = check.timings[0]
            print(
                f"| {'judged' if sandboxed else 'plain'} | {t.measurement.median_s * 1e6:.1f} us "
                f"| {t.measurement.n} | {t.clock} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
