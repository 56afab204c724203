"""`kernel-lsp bench FILE [--kernel K]`: verify, then print a latency table per kernel and size.

kernel       case          median     p10-p90              n    GB/s   % roofline  device  L2
vector_add   n=33554432    120.31 us  119.90 us-121.02 us  57  3346.6   87% DRAM   H100    cold
occupancy vector_add (n=33554432): achieved 91.2%, theoretical 100.0% (ncu)

`--profile` adds what limits each kernel and its hottest lines (Nsight Compute); `--json` prints
the checks (timings, profile) as JSON instead of the table, and nothing else on stdout: a failed
check is in the document, and when nothing could run the document says why (`error`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from kernel_lsp.stats import format_seconds

EXIT_OK, EXIT_FAILED, EXIT_TOOL = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    from .flags import add_backend_flags

    p = argparse.ArgumentParser(prog="kernel-lsp bench", description=__doc__.splitlines()[0])
    p.add_argument("file", help="a .cu file with a <stem>.spec.py beside it")
    p.add_argument("--kernel", help="only this kernel (default: every kernel the spec describes)")
    p.add_argument("--spec", help="the spec file (default: <stem>.spec.py)")
    p.add_argument("--device", type=int, default=None, help="GPU index (after CUDA_VISIBLE_DEVICES)")
    p.add_argument("--warm-l2", action="store_true", help="keep L2 warm between samples")
    p.add_argument("--budget", type=float, default=1.0, help="sampling seconds per case")
    p.add_argument("--include", "-I", action="append", default=[], help="include directory")
    p.add_argument("--define", "-D", action="append", default=[], help="NAME[=value]")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per launch before giving up")
    add_backend_flags(p)
    p.add_argument("--no-occupancy", action="store_true", help="skip reading achieved occupancy with ncu")
    p.add_argument(
        "--profile",
        action="store_true",
        help="with ncu: print the limiter, speed of light, top stalls and hottest lines of each kernel",
    )
    p.add_argument("--json", action="store_true", help="print the checks (timings, profile) as JSON")
    return p


def bench_main(
    argv_or_path: Sequence[str] | str,
    kernel: str | None = None,
    out: TextIO | None = None,
    **options: object,
) -> int:
    """Entry for the CLI (`bench_main(argv)`) and for callers (`bench_main(path, kernel=...)`).
    Exit 0 when every kernel verified, 1 when one failed, 2 when nothing could run."""
    out = out or sys.stdout
    if isinstance(argv_or_path, str):
        argv = [argv_or_path] + (["--kernel", kernel] if kernel else [])
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
    else:
        argv = list(argv_or_path)
    args = _parser().parse_args(argv)

    from kernel_lsp.compile import read_source
    from kernel_lsp.evaluation.choose import RayUnavailable, open_backends
    from kernel_lsp.gpu import GpuSession, no_gpu_message
    from kernel_lsp.profile_text import profile_lines
    from kernel_lsp.runner.timing import TimingSettings
    from kernel_lsp.spec import spec_path_for
    from kernel_lsp.spec.isolated import load_specs_isolated
    from kernel_lsp.workspace import Workspace

    from .formats import gpu_json

    def tool_failed(message: str) -> int:
        """Nothing could run: the reason on stderr, and with --json a JSON document on stdout too."""
        print(f"kernel-lsp bench: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"device": None, "error": message, "checks": []}, indent=2), file=out)
        return EXIT_TOOL

    path = os.path.abspath(args.file)
    source, problem = read_source(path)  # as --check reads it: BOM dropped, not-UTF-8 bytes as "?"
    if source is None:
        return tool_failed(f"{path}: {problem.message if problem else 'cannot read'}")
    spec_path = args.spec or spec_path_for(path)
    if not os.path.exists(spec_path):
        return tool_failed(f"no spec {spec_path} (see docs/specs.md)")
    loaded = load_specs_isolated(spec_path)
    for d in loaded.diagnostics:
        print(f"{d.path}:{d.line}:{d.col}: {d.severity.label}: {d.message}", file=sys.stderr)
    specs = [s for s in loaded.specs if args.kernel in (None, s.kernel, s.name)]
    if not loaded.ok:
        return tool_failed(f"{spec_path} has errors")
    if not specs:
        return tool_failed(f"no spec for kernel {args.kernel}")

    timing = TimingSettings(cold_l2=not args.warm_l2, budget_s=args.budget)
    # The file's pyproject.toml and compile_commands.json, as --check and the editor see them.
    overrides = {"includeDirs": [os.path.abspath(d) for d in args.include], "defines": list(args.define)}
    workspace = Workspace({k: v for k, v in overrides.items() if v})
    try:
        # One GPU: this machine's (--device), or one Ray actor's (--backend ray).
        backend = open_backends(
            args.backend,
            "1",
            args.device,
            args.ray_address,
            log=lambda line: print(line, file=sys.stderr),
            launch_timeout_s=args.timeout,
            timing=timing,
        )[0]
    except RayUnavailable as e:
        return tool_failed(str(e))
    with GpuSession(backend=backend) as gpu:
        if not gpu.available:
            return tool_failed(no_gpu_message(gpu.reason))
        dev = gpu.device
        rows: list[list[str]] = []
        failed = False
        occupancy: list[str] = []
        # One compile for the device's exact arch (NVRTC or nvcc: compile_source picks), shared by
        # every spec'd kernel of the file.
        options_ = workspace.device_options(path, dev, source)
        artifact = gpu.compile(source, path, options_)
        defines = options_.defines
        checks = []
        for spec in specs:
            check = gpu.check(source, path, loaded, spec.kernel, artifact, defines=defines)
            checks.append(check)
            if args.profile or not args.no_occupancy:
                gpu.add_occupancy(check, source, path, loaded, artifact, defines=defines)
            if args.profile and check.profile is not None:
                occupancy += profile_lines(check.profile)
            else:
                occupancy += [
                    f"occupancy {o.kernel} ({o.case}): achieved {o.achieved:.1%}, theoretical {o.theoretical:.1%} (ncu)"
                    for o in check.occupancy
                ]
                if check.occupancy_note:
                    occupancy.append(f"occupancy {spec.title}: {check.occupancy_note}")
            if not check.ok:
                failed = True
                if not args.json:  # with --json the failure is in the document, and only there
                    status = (
                        "SUSPICIOUS" if any(p.kind == "suspicious" for p in check.problems) else check.status
                    )
                    print(f"{spec.title}: {status}: {check.message}", file=out)
                    for d in check.diagnostics[1:]:
                        print(f"  {d.message}", file=out)
                continue
            for t in check.timings:
                m = t.measurement
                rows.append(
                    [
                        spec.title,
                        t.case,
                        format_seconds(m.median_s),
                        f"{format_seconds(m.p10_s)}-{format_seconds(m.p90_s)}",
                        str(m.n),
                        f"{t.bandwidth_Bps / 1e9:.1f}",
                        t.roofline_text or "-",
                        dev.short_name if dev else "?",
                        "cold" if m.cold_l2 else "warm",
                    ]
                    + (["SUSPICIOUS"] if t.suspicious else [])
                    + ([t.bound_note] if t.bound_note else [])
                )
        if args.json:
            doc = {"device": dev.name if dev else None, "checks": [gpu_json(c) for c in checks]}
            print(json.dumps(doc, indent=2), file=out)
            return EXIT_FAILED if failed else EXIT_OK
        if rows:
            head = ["kernel", "case", "median", "p10-p90", "n", "GB/s", "% roofline", "device", "L2"]
            print_table(head, rows, out)
        for line in occupancy:
            print(line, file=out)
        if dev:
            print(
                f"device: {dev.name} ({dev.arch}, {dev.sm_count} SMs, "
                f"memory {dev.bandwidth_Bps / 1e9:.0f} GB/s measured)",
                file=out,
            )
        return EXIT_FAILED if failed else EXIT_OK


def print_table(head: list[str], rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        cells = [c.ljust(widths[i]) if i < len(widths) else c for i, c in enumerate(r)]
        print("  ".join(cells).rstrip(), file=out)


if __name__ == "__main__":
    sys.exit(bench_main(sys.argv[1:]))
