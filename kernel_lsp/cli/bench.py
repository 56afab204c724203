"""`kernel-lsp bench FILE [--kernel K]`: verify, then print a latency table per kernel and size.

kernel       case          median     p10-p90              n    GB/s   % roofline  device  L2
vector_add   n=33554432    120.31 us  119.90 us-121.02 us  57  3346.6   87% DRAM   H100    cold
occupancy vector_add (n=33554432): achieved 91.2%, theoretical 100.0% (ncu)

An entry spec (`Spec(entry=...)`) runs the file as a shared library, built as `check` and
`optimize` build it (the Workspace: the file's settings and flags, `evaluation.backend`); its
lines say which kernels the entry launched, each with its share of the time where the ncu profile
measured it.

`--profile` adds what limits each kernel and its hottest lines (Nsight Compute); `--json` prints
the checks (timings, profile) as JSON instead of the table, and nothing else on stdout: a failed
check is in the document, and when nothing could run the document says why (`error`). Each check
has `kernels` (those it launched: `kernel`, `share` of the kernels' time under ncu, `seconds`;
null where not measured) and `sharesNote` (why they were not).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from kernel_lsp.api.model import format_seconds

EXIT_OK, EXIT_FAILED, EXIT_TOOL = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    from .flags import add_backend_flags, doc_description

    p = argparse.ArgumentParser(prog="kernel-lsp bench", description=doc_description(__doc__))
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

    from kernel_lsp.api.gpu import (
        RayUnavailable,
        TimingSettings,
        no_gpu_message,
        profile_lines,
    )
    from kernel_lsp.api.sources import spec_path_for

    from .formats import gpu_json

    def tool_failed(message: str) -> int:
        """Nothing could run: the reason on stderr, and with --json a JSON document on stdout too."""
        print(f"kernel-lsp bench: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"device": None, "error": message, "checks": []}, indent=2), file=out)
        return EXIT_TOOL

    path = os.path.abspath(args.file)
    # The file's pyproject.toml and compile_commands.json under the flags, as --check, optimize
    # and the editor see them: its compile options, and the evaluation backend it names.
    workspace = _workspace(args)
    source, problem = workspace.read(path)  # as --check reads it: BOM dropped, not-UTF-8 bytes as "?"
    if source is None:
        return tool_failed(f"{path}: {problem.message if problem else 'cannot read'}")
    spec_path = args.spec or spec_path_for(path)
    if not os.path.exists(spec_path):
        return tool_failed(no_spec_message(args.file, spec_path, source, args.kernel))
    loaded = workspace.load_specs(path, spec_path)
    for d in loaded.diagnostics:
        print(f"{d.path}:{d.line}:{d.col}: {d.severity.label}: {d.message}", file=sys.stderr)
    specs = [s for s in loaded.specs if args.kernel in (None, s.kernel, s.name)]
    if not loaded.ok:
        return tool_failed(f"{spec_path} has errors")
    if not specs:
        return tool_failed(f"no spec for kernel {args.kernel}")

    timing = TimingSettings(cold_l2=not args.warm_l2, budget_s=args.budget)
    for line in workspace.problems(path):
        print(f"kernel-lsp: {line}", file=sys.stderr)
    try:
        # One GPU: this machine's (--device), or one Ray actor's (evaluation.backend, --backend ray).
        sessions, reason = workspace.open_gpus(
            "1",
            lambda line: print(line, file=sys.stderr),
            path=path,
            launch_timeout_s=args.timeout,
            timing=timing,
        )
    except RayUnavailable as e:
        return tool_failed(str(e))
    if not sessions:
        return tool_failed(no_gpu_message(reason))
    for extra in sessions[1:]:
        extra.close()
    with sessions[0] as gpu:
        dev = gpu.device
        rows: list[list[str]] = []
        failed = False
        occupancy: list[str] = []
        # One compile for the device's exact arch (NVRTC or nvcc: compile_source picks) shared by
        # the file's spec'd kernels, and one shared library for its entry specs.
        wanted = [s.kernel for s in specs]
        result = workspace.bench(
            gpu, path, source, loaded, wanted, profile=args.profile or not args.no_occupancy
        )
        checks = result.checks
        for spec, check in zip(specs, checks, strict=True):
            if args.profile and check.profile is not None:
                occupancy += profile_lines(check.profile)
            else:
                occupancy += [
                    f"occupancy {o.kernel} ({o.case}): achieved {o.achieved:.1%}, theoretical {o.theoretical:.1%} (ncu)"
                    for o in check.occupancy
                ]
                if check.occupancy_note:
                    occupancy.append(f"occupancy {spec.title}: {check.occupancy_note}")
            if spec.is_entry:
                occupancy.append(launched_line(spec.title, result.launched.get(spec.kernel, [])))
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
            docs = []
            for spec, check in zip(specs, checks, strict=True):
                doc = gpu_json(check)
                doc["entry"] = spec.is_entry
                doc["kernels"] = [
                    {"kernel": k.kernel, "share": k.share, "seconds": k.time_s}
                    for k in result.launched.get(spec.kernel, [])
                ]
                doc["sharesNote"] = result.shares_note.get(spec.kernel)
                docs.append(doc)
            print(json.dumps({"device": dev.name if dev else None, "checks": docs}, indent=2), file=out)
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


def _workspace(args: argparse.Namespace):
    """The Workspace of the run: each file's settings under the flags (-I, -D, --backend,
    --ray-address, --device)."""
    from kernel_lsp.api.checks import parse_overrides
    from kernel_lsp.workspace import Workspace

    from .flags import backend_overrides

    overrides: dict[str, object] = {**backend_overrides(args)}
    if args.include:
        overrides["includeDirs"] = [os.path.abspath(d) for d in args.include]
    if args.define:
        overrides["defines"] = list(args.define)
    if args.device is not None:
        overrides["gpu.device"] = args.device
    return Workspace(parse_overrides(overrides))


def launched_line(title: str, launched: list) -> str:
    """`kernels layernorm_fp32 launched: row_mean_kernel 21%, normalize_kernel 79%`, or without
    shares where the profile did not measure them."""
    if not launched:
        return f"kernels {title} launched: none found in the file"
    parts = [f"{k.kernel} {k.share:.0%}" if k.share is not None else k.kernel for k in launched]
    tail = "" if all(k.share is not None for k in launched) else " (share of the time not measured)"
    return f"kernels {title} launched: {', '.join(parts)}{tail}"


def print_table(head: list[str], rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        cells = [c.ljust(widths[i]) if i < len(widths) else c for i, c in enumerate(r)]
        print("  ".join(cells).rstrip(), file=out)


if __name__ == "__main__":
    sys.exit(bench_main(sys.argv[1:]))


def no_spec_message(file: str, spec_path: str, source: str, kernel: str | None) -> str:
    """No spec beside the file: what `kernel-lsp spec` command writes one."""
    from kernel_lsp.api.skeletons import launcher_entries
    from kernel_lsp.api.sources import find_kernels

    entries = launcher_entries(source)
    if kernel is None and entries:
        which = "" if len(entries) == 1 else f" --entry {entries[0]}"
        found = f" (launchers: {', '.join(entries)})" if len(entries) > 1 else ""
        return (
            f"no spec {os.path.relpath(spec_path)}: bench verifies and times the file's launcher against its "
            f"spec; `kernel-lsp spec {file}{which}` writes a skeleton to fill in{found} (see docs/specs.md)"
        )
    names = sorted({k.name for k in find_kernels(source) if k.definition})
    if kernel is None and len(names) == 1:
        kernel = names[0]
    which = f"--kernel {kernel}" if kernel else "--kernel K"
    found = f" (kernels: {', '.join(names)})" if not kernel and names else ""
    return (
        f"no spec {os.path.relpath(spec_path)}: bench verifies and times a kernel against its spec; "
        f"`kernel-lsp spec {file} {which}` writes a skeleton to fill in{found} (see docs/specs.md)"
    )
