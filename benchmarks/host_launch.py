"""What reading launches from host code costs, next to the compile it rides on.

For each file with host code (tests/fixtures/host_launch, tests/fixtures/real_projects, samples)
and a synthetic large file (many launchers): parse_host (every launch resolved, the launchers as
data) and read_constants, median of N runs, in this process; the launches found and how many
resolve; then, where nvcc is found, the bare nvcc compile of the same text (compile_source without
its cache), so the ratio says what the extra reading adds to a check. Measured side by side.

    .venv/bin/python benchmarks/host_launch.py [--runs 20] [--nvcc-runs 2] [--launchers 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain  # noqa: E402
from kernel_lsp.constants import read_constants  # noqa: E402
from kernel_lsp.host_launch import parse_host  # noqa: E402


def synthetic(launchers: int) -> str:
    """A large file: one kernel and `launchers` extern "C" launchers of assorted styles."""
    parts = ["#define BLOCK 256\n__global__ void k(const float* x, float* y, int n) {}\n"]
    for i in range(launchers):
        parts.append(
            f'extern "C" void launch_{i}(const float* x, float* y, int n) {{\n'
            f"    int threads = {32 << (i % 6)};\n"
            "    dim3 block(threads);\n"
            "    dim3 grid((n + block.x - 1) / block.x);\n"
            "    float* tmp;\n    cudaMalloc(&tmp, n * sizeof(float));\n"
            "    if (n > 1024) { k<<<grid, block, 0, 0>>>(x, tmp, n); }\n"
            "    k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(tmp, y, n);\n"
            "    cudaFree(tmp);\n}\n"
        )
    return "".join(parts)


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--nvcc-runs", type=int, default=2)
    p.add_argument("--launchers", type=int, default=400)
    args = p.parse_args()
    files = sorted((REPO / "tests" / "fixtures" / "host_launch").glob("*.cu"))
    files += sorted((REPO / "tests" / "fixtures" / "real_projects").glob("*/*.cu"))
    files += [f for f in sorted((REPO / "samples").glob("**/*.cu")) if "<<<" in f.read_text()]
    texts = [(str(f.relative_to(REPO)), f.read_text()) for f in files]
    texts.append((f"synthetic ({args.launchers} launchers)", synthetic(args.launchers)))
    nvcc = find_toolchain().problem is None and args.nvcc_runs > 0
    print(
        f"| file | lines | launches | resolved | parse_host ms | constants ms | {'nvcc ms | ratio |' if nvcc else ''}"
    )
    print(f"|---|---|---|---|---|---|{'---|---|' if nvcc else ''}")
    for name, text in texts:
        host = parse_host(text)
        resolved = sum(1 for x in host.launches if x.resolved)
        parse = median_ms(lambda text=text: parse_host(text), args.runs)
        consts = median_ms(lambda text=text: read_constants(text), args.runs)
        row = f"| {name} | {text.count(chr(10)) + 1} | {len(host.launches)} | {resolved} | {parse:.2f} | {consts:.2f} |"
        compilable = "vllm" not in name and "synthetic" not in name and "broken" not in name
        if nvcc and compilable:
            options = CompileOptions(arch="sm_90", compiler="nvcc")
            ms = median_ms(
                lambda text=text, name=name, options=options: compile_source(
                    text, name, options, use_cache=False
                ),
                args.nvcc_runs,
            )
            row += f" {ms:.0f} | {parse / ms:.3f} |"
        elif nvcc:
            row += " – | – |"
        print(row)


if __name__ == "__main__":
    main()
