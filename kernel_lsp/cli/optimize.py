"""`kernel-lsp optimize FILE [--kernel K] [--rounds D --candidates N --proposer llm|tune --apply]`.

Progress goes to stderr while it runs; stdout gets the unified diff, a before/after table and the
verdict. Exit codes: 0 a faster candidate was found (and written with --apply), 1 nothing was
offered, 2 the run could not start (no spec, no GPU, bad arguments).

--apply writes the file only when its content is still what the run started from, and only after
a backup copy has been written under `.kernel-lsp/backups/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from kernel_lsp.api.sources import find_kernels
from kernel_lsp.workspace import Workspace

from ..api.checks import parse_overrides
from ..api.optimize import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    OptimizeError,
    PrintObserver,
    before_after_rows,
    run,
    unified_diff,
)
from ..api.optimize import request as optimize_request
from ..api.sources import (
    MAX_FILE_BYTES,
    FileProblem,
    create_in_workspace,
    read_regular,
    read_text_file,
    replace_file,
)
from .flags import add_backend_flags, backend_overrides, gpus_arg
from .spec import pick_kernel

EXIT_FOUND, EXIT_NOTHING, EXIT_FAILED = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kernel-lsp optimize",
        description="FSR optimization of one kernel: propose, compile, verify on the GPU, time; "
        "offer the fastest correct candidate if it is faster with confidence.",
    )
    p.add_argument("file", help="the .cu file")
    p.add_argument(
        "--kernel",
        "-k",
        help="kernel, entry (a launcher an entry spec names) or pipeline name (default: the entry the "
        "spec names, else the file's only kernel)",
    )
    p.add_argument(
        "--rounds", "-d", type=int, help="rounds (default: settings; the tuner runs until its search ends)"
    )
    p.add_argument("--candidates", "-n", type=int, help="candidates per round (default: settings, 4)")
    p.add_argument(
        "--proposer",
        choices=("auto", "llm", "tune"),
        help="default: llm when a model is configured, else tune",
    )
    p.add_argument(
        "--strategy", choices=sorted(STRATEGIES), default=DEFAULT_STRATEGY, help="the tuner's search strategy"
    )
    p.add_argument(
        "--min-speedup", type=float, default=1.02, help="the A/B lower bound must clear this (default 1.02)"
    )
    p.add_argument("--budget-s", type=float, help="stop starting new candidates after this many seconds")
    p.add_argument("--max-evaluations", type=int, default=256)
    p.add_argument(
        "--apply", action="store_true", help="write the accepted candidate to FILE (after a backup)"
    )
    p.add_argument("--no-cache", action="store_true", help="do not reuse results from earlier runs")
    p.add_argument("--model", help="LLM model (else kernelLsp llm.model / OPENAI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (else llm.baseUrl / OPENAI_BASE_URL)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per LLM request")
    p.add_argument("--concurrency", type=int, default=4, help="LLM requests at a time")
    p.add_argument("--workspace", help="where .kernel-lsp/reports goes (default: the current folder)")
    add_backend_flags(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of text")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument(
        "--gpus",
        metavar="all|N",
        type=gpus_arg,
        help="check each round's candidates in parallel on all visible GPUs or on N (default: one)",
    )
    return p


def _engine(path: str, args: argparse.Namespace) -> Workspace:
    """The file's pyproject.toml under the command's flags (as --check and the editor see it)."""
    overrides = backend_overrides(args)
    if args.model:
        overrides["llm.model"] = args.model
    if args.base_url:
        overrides["llm.baseUrl"] = args.base_url
    if args.gpus:
        overrides["gpu.devices"] = args.gpus
    engine = Workspace(parse_overrides(overrides))
    for problem in engine.problems(path):
        print(f"kernel-lsp: {problem}", file=sys.stderr)
    return engine


def table(rows: list[tuple[str, str, str]]) -> str:
    head = ("", "before", "after")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


BACKUP_DIR = (".kernel-lsp", "backups")


def apply_result(path: str, started_with: str, new_source: str, workspace: str) -> str:
    """Write `new_source` to `path` if it still holds `started_with`; back it up first. Returns a
    message; raises OptimizeError when the file changed meanwhile."""
    try:
        now = read_text_file(path, errors="replace")  # as `started_with` was read
    except OSError as e:
        raise OptimizeError(f"cannot read {path} to apply the result: {e}") from None
    if now != started_with:
        raise OptimizeError(
            f"{path} changed while the run was going on; not written. The diff above and the report hold the result."
        )
    stem = f"{os.path.basename(path)}.{time.strftime('%Y%m%d-%H%M%S')}"
    try:  # never through a `.kernel-lsp` link the repository ships (safe_write.py)
        data = read_regular(path, MAX_FILE_BYTES)
        names = [stem] + [f"{stem}-{n}" for n in range(2, 100)]
        backup, copy = create_in_workspace(workspace, BACKUP_DIR, names, binary=True)
        with copy:
            copy.write(data)
        replace_file(path, new_source)
    except OSError as e:
        raise OptimizeError(str(e)) from None
    return f"applied to {path} (backup: {backup})"


def _only_entry(path: str, source: str) -> str | None:
    """The entry a file's spec names, when it names exactly one (read as text). A spec that cannot
    be read (a FIFO, a device: not waited on) names none here; the run says why it cannot use it."""
    from ..api.optimize import named_entries
    from ..api.sources import spec_path_for

    try:
        entries = named_entries(read_text_file(spec_path_for(path)), source)
    except (OSError, UnicodeDecodeError):
        return None
    return entries[0] if len(entries) == 1 else None


def optimize_main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    path = os.path.abspath(args.file)
    try:
        started_with = read_text_file(path, errors="replace")
    except FileNotFoundError:
        print(f"kernel-lsp optimize: {args.file}: no such file", file=sys.stderr)
        return EXIT_FAILED
    except FileProblem as e:  # a FIFO, a device, a folder, a huge file: said, never waited on
        print(f"kernel-lsp optimize: {e}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as e:
        print(f"kernel-lsp optimize: {args.file}: cannot read it ({e.strerror or e})", file=sys.stderr)
        return EXIT_FAILED
    workspace = os.path.abspath(args.workspace or os.getcwd())
    kernel_name = args.kernel
    if kernel_name is None:  # the one entry the spec names (the whole file), else the one kernel
        kernel_name = _only_entry(path, started_with)
    if kernel_name is None:
        kernel, why = pick_kernel(find_kernels(started_with), None)
        if kernel is None:
            print(f"kernel-lsp optimize: {args.file}: {why}", file=sys.stderr)
            return EXIT_FAILED
        kernel_name = kernel.name
    req = optimize_request(
        _engine(path, args),
        path,
        kernel_name,
        source=started_with,
        proposer=args.proposer,
        rounds=args.rounds,
        candidates=args.candidates,
        strategy=args.strategy,
        min_speedup=args.min_speedup,
        time_budget_s=args.budget_s,
        max_evaluations=args.max_evaluations,
        use_cache=not args.no_cache,
        workspace=workspace,
        llm_temperature=args.temperature,
        llm_timeout_s=args.timeout,
        llm_concurrency=args.concurrency,
    )
    observers = [] if args.quiet or args.json else [PrintObserver(sys.stderr)]
    try:
        result = run(req, observers=observers)
    except OptimizeError as e:
        print(f"kernel-lsp optimize: {e}", file=sys.stderr)
        return EXIT_FAILED
    new = result.accepted.source if result.accepted else None
    diff = unified_diff(started_with, new, path) if new else ""
    applied = ""
    if args.apply and new:
        try:
            applied = apply_result(path, started_with, new, workspace)
        except OptimizeError as e:
            applied = f"not applied: {e}"
    if result.report_problem:
        print(f"kernel-lsp optimize: {result.report_problem}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "accepted": result.accepted.id if result.accepted else None,
                    "verdict": result.verdict,
                    "device": result.device,
                    "diff": diff,
                    "before_after": before_after_rows(result),
                    "reports": result.report_paths,
                    "applied": applied,
                },
                indent=1,
            )
        )
    else:
        if diff:
            print(diff.rstrip())
            print()
        print(table(before_after_rows(result)))
        print()
        print(result.verdict)
        if applied:
            print(applied)
        for p in result.report_paths:
            if p.endswith(".md"):
                print(f"report: {p}")
    if applied.startswith("not applied"):
        return EXIT_FAILED
    return EXIT_FOUND if result.accepted else EXIT_NOTHING
