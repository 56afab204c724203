"""What the proof gate costs: each compute-sanitizer tool's run on a host entry's smallest
non-trivial case, next to the verification of the same file, measured side by side on one GPU.

    PYTHONPATH=. python benchmarks/sanitizer_cost.py [FILE.cu ...]

Default files: the GPU tests' bf16 vector add (clean) and the planted uninitialized shared read.
Prints one row per file: verification seconds, each tool's seconds, the gate's total and its
ratio to verification, and what the tools found.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp.compile import CompileOptions  # noqa: E402
from kernel_lsp.gpu import GpuCheckRequest, GpuSession, check_file  # noqa: E402
from kernel_lsp.gpu_reports import TOOLS  # noqa: E402
from kernel_lsp.model import TimingSettings  # noqa: E402
from kernel_lsp.runner.sanitizer import find_sanitizer  # noqa: E402

ENTRIES = REPO / "tests" / "gpu" / "fixtures" / "entries"


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or [ENTRIES / "vector_add_bf16.cu", ENTRIES / "planted_reduce.cu"]
    if find_sanitizer() is None:
        print("compute-sanitizer is not installed here: nothing to measure")
        return 1
    header = ["file", "verify s", *(f"{t} s" for t in TOOLS), "gate s", "gate/verify", "findings"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    with GpuSession(timing=TimingSettings(budget_s=0.2)) as gpu:
        if not gpu.available:
            print(f"no GPU: {gpu.reason}")
            return 1
        for path in files:
            options = gpu.compile_options_for_device(CompileOptions())
            library = gpu.build_library(path.read_text(), str(path), options)  # compiled once, outside both
            start = time.perf_counter()
            check_file(gpu, str(path), compile_options=options, measure=False)
            verify_s = time.perf_counter() - start
            start = time.perf_counter()
            report = gpu.prove(GpuCheckRequest(path.read_text(), str(path), artifact=library))
            gate_s = time.perf_counter() - start
            found = "; ".join(f.describe() for f in report.findings) or report.note or "none"
            cells = [
                path.name,
                f"{verify_s:.2f}",
                *(f"{report.tools.get(t, float('nan')):.2f}" for t in TOOLS),
            ]
            cells += [f"{gate_s:.2f}", f"{gate_s / verify_s:.1f}x", found]
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
