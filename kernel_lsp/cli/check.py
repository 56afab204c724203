"""`kernel-lsp check PATH...` (alias `kernel-lsp --check PATH...`): check files for pre-commit and CI.

Exit codes (ruff's convention): 0 no errors, 1 errors (or, with --strict, warnings and files not
checked in time), 2 the tool itself failed (bad arguments, a path that does not exist or is not
CUDA, no CUDA files found, NVRTC missing)."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import TYPE_CHECKING

from ..api.checks import (
    CUDA_SUFFIXES,
    CheckScheduler,
    FileCheck,
    archs_checked,
    check_files,
    prepare_report,
)
from ..api.model import DESCRIPTIONS, is_number
from ..api.sources import MAX_FILE_BYTES, spec_path_for
from ..workspace import Workspace
from .flags import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_TOOL_FAILED,
    add_backend_flags,
    add_compile_flags,
    add_specs_flag,
    gpus_arg,
    specs_not_run_reason,
    specs_overrides,
    workspace_from_args,
    write_stdout,
)

if TYPE_CHECKING:
    from ..api.gpu import FileDone, KernelCheck


def run_checks(files: list[str], workspace: Workspace, jobs: int, gpu=None, on_file=None) -> list[FileCheck]:
    """scheduler.check_files, with the rest of the engine loaded first (`_load_the_rest`)."""
    _load_the_rest()
    return check_files(workspace, files, jobs, gpu, on_file)


def _load_the_rest() -> None:
    """What the checks and check_main need (numpy for specs and GPU verification: ~0.2 s), loaded
    before the workers fork: they inherit it, where they and this process each imported it
    before, and a one-file check costs what it did in process."""
    Workspace.load_gpu_side()
    from . import formats  # noqa: F401


DESCRIPTION = """\
Compile CUDA files (NVRTC for device code, nvcc for files with host code) and report findings; with
a GPU, verify and time the kernels that have a spec. A clean run prints one summary line;
--show-resources (or -v) adds each kernel's registers, shared memory, spills and occupancy.
`kernel-lsp --check PATH...` is the same command (the older spelling, kept as an alias)."""

EPILOG = """\
codes (--select, --ignore, and select/ignore in [tool.kernel-lsp]): the compiler's numbers
(177-D, 20011-D; 177 means 177-D) and kernel-lsp's own (spill, spec-args, gpu-mismatch,
launch-comment, ...); a prefix selects every code it starts (spec- is every spec code). Compile
errors and files that could not be checked are always reported. The compiler's own pragma works
too: #pragma nv_diag_suppress 177.

exit codes: 0 no errors (or --exit-zero), 1 errors (warnings too with --strict), 2 the tool failed."""


def _codes(values: list[str] | None) -> list[str] | None:
    """`--ignore spill,177 --ignore spec-` -> ["spill", "177", "spec-"]."""
    if values is None:
        return None
    return [c for v in values for c in v.replace(",", " ").split()]


def _unknown_codes_message(flag: str, unknown: list[str]) -> str:
    """`--select E999`: which selector matches no code, the nearest code when it looks like a
    typo, and what codes are. `--select 9999`: a number the compiler has no diagnostic for."""
    names = [c for c in DESCRIPTIONS if not c.endswith("-")]
    parts = []
    for u in unknown:
        if is_number(u):
            parts.append(f"`{u}` (the compiler has no diagnostic of that number)")
            continue
        near = difflib.get_close_matches(u.lower(), names, n=1)
        parts.append(f"`{u}`" + (f" (did you mean `{near[0]}`?)" if near else ""))
    return (
        f"invalid value for {flag}: no diagnostic code starts with {', '.join(parts)}; codes are the "
        "compiler's numbers (177, 20011-D) and kernel-lsp's own (spill, launch-comment, spec-, gpu-, "
        "...; see --help)"
    )


def parser(prog: str = "kernel-lsp check") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        help=".cu/.cuh files or folders (searched recursively); - reads one file from stdin",
    )
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text")
    p.add_argument("--output-file", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="print the findings only: no summary line")
    p.add_argument(
        "--show-resources",
        "-v",
        "--verbose",
        dest="show_resources",
        action="store_true",
        help="also print each kernel's resources and occupancy, and its GPU figures",
    )
    p.add_argument("--strict", action="store_true", help="warnings fail the check too")
    p.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when there are findings (2 still means a failure)",
    )
    p.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="report only these codes (comma-separated; prefixes allowed); replaces `select` of pyproject.toml",
    )
    p.add_argument(
        "--ignore",
        action="append",
        metavar="CODES",
        help="do not report these codes (comma-separated; prefixes allowed); adds to `ignore` of pyproject.toml",
    )
    p.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="read the file's text from stdin and check it as if it were PATH (its project's flags, its spec)",
    )
    p.add_argument(
        "--no-gpu",
        action="store_true",
        help="compile only: skip GPU verification even when a GPU is present",
    )
    p.add_argument(
        "--occupancy",
        action="store_true",
        help="with a GPU and ncu: profile each verified kernel (limiter, achieved occupancy; seconds per kernel)",
    )
    p.add_argument(
        "--gpus",
        metavar="all|N",
        type=gpus_arg,
        help="verify spec'd files in parallel on all visible GPUs or on N of them (default: all, or gpu.devices)",
    )
    add_backend_flags(p)
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--watch", action="store_true", help="re-check on change, printing only what changed")
    p.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply the `exclude` setting to files named on the command line too (the pre-commit hook does)",
    )
    p.add_argument(
        "--max-file-bytes",
        type=int,
        metavar="N",
        help=f"larger files are not checked and fail the check (default {MAX_FILE_BYTES}, 2 MiB)",
    )
    add_specs_flag(p)
    add_compile_flags(p)
    return p


def check_main(argv: list[str], prog: str = "kernel-lsp check") -> int:
    p = parser(prog)
    args = p.parse_args(argv)
    stdin_text = None
    if args.stdin_filename is not None or args.paths == ["-"]:
        if args.paths not in ([], ["-"]):
            p.error("with --stdin-filename (or -), name no other paths: stdin holds the one file")
        if args.watch:
            p.error("--watch follows files on disk; it cannot read stdin")
        stdin_text = sys.stdin.read()
        args.paths = [args.stdin_filename or "stdin.cu"]
    elif not args.paths:
        p.error("name the files or folders to check (or - with --stdin-filename PATH for stdin)")
    specs, specs_asked = specs_overrides(args.specs)
    more: dict = {"gpu.enabled": False, **specs} if args.no_gpu else dict(specs)
    if args.max_file_bytes is not None:
        more["maxFileBytes"] = max(0, args.max_file_bytes)
    select, ignore = _codes(args.select), _codes(args.ignore)
    for flag, codes in (("--select", select), ("--ignore", ignore)):
        if unknown := Workspace.unknown_codes(codes or []):
            p.error(_unknown_codes_message(flag, unknown))  # exit 2, as ruff does for a bad selector
    if select is not None:
        more["select"] = select
    if ignore is not None:
        more["extend-ignore"] = ignore
    workspace, problems = workspace_from_args(args, args.paths[0], **more)
    settings = workspace.settings_for(os.path.abspath(args.paths[0]))
    for problem in problems:
        print(f"kernel-lsp: config: {problem}", file=sys.stderr)
    archs = settings.archs()
    if bad_arch := workspace.arch_problems(os.path.abspath(args.paths[0])):
        print(f"kernel-lsp: {bad_arch[0]}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    if stdin_text is not None:
        gpu_off = _gpu_off_reason(args, workspace, stdin_text)
        checks = _check_stdin(args.paths[0], stdin_text, workspace)
        if checks is None:
            return EXIT_TOOL_FAILED
    else:
        selection = workspace.select_files(args.paths, args.force_exclude)
        for m in selection.missing:
            print(f"kernel-lsp: no such file or folder: {m}", file=sys.stderr)
        for m in selection.not_cuda:
            print(f"kernel-lsp: not a CUDA file (.cu or .cuh): {m}", file=sys.stderr)
        if selection.missing or selection.not_cuda:
            return EXIT_TOOL_FAILED
        if args.watch:
            from .watch import watch_check_main

            return watch_check_main(args.paths, workspace, args.format)
        files = selection.files
        if not files:
            if selection.excluded:  # pre-commit named only excluded files: nothing to do is a pass
                if not args.quiet:
                    print(
                        f"kernel-lsp: nothing to check: {len(selection.excluded)} file(s) excluded by the "
                        "`exclude` setting",
                        file=sys.stderr,
                    )
                return EXIT_CLEAN
            print(f"kernel-lsp: no .cu or .cuh files found under {' '.join(args.paths)}", file=sys.stderr)
            return EXIT_TOOL_FAILED
        from ..api.gpu import GpuPlan, RayUnavailable

        gpu_off = _gpu_off_reason(args, workspace, None)  # None: verify on the GPUs
        plan = None
        if gpu_off is None:  # verified as each file compiles; local: every visible GPU by default
            plan = GpuPlan(
                args.gpus,
                lambda path: not specs_not_run_reason(workspace.settings_for(path), specs_asked),
                args.occupancy,
                _quiet if args.quiet else _stderr,
            )
        progress = _Progress(args.show_resources, args.quiet)
        try:
            checks = run_checks(files, workspace, args.jobs, plan, progress)
        except RayUnavailable as e:
            print(f"kernel-lsp: {e}", file=sys.stderr)
            return EXIT_TOOL_FAILED
        finally:
            progress.end()
    if any(d.code == "nvrtc" for c in checks for d in c.diagnostics):
        print(
            "kernel-lsp: NVRTC could not run; install `cuda-python[all]` and `cuda-toolkit[cudart,cccl]`",
            file=sys.stderr,
        )
        return EXIT_TOOL_FAILED
    if full := next((d for c in checks for d in c.diagnostics if d.code == "disk-full"), None):
        print(f"kernel-lsp: {full.message.removeprefix('not checked: ')}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    # Files whose specs were only read (--specs static, CI, their pyproject.toml) are not verified.
    rest = _specs_read_only(checks, workspace, specs_asked)
    if gpu_off is not None:
        workspace.unverified(rest, gpu_off)
    # GPU findings pass the same selection; then each finding once (a header's at the header).
    for c in checks:
        workspace.reported(c)
    # JSON and SARIF list a header's error under every file it breaks; text says it once.
    prepare_report(checks, per_file=args.format in ("json", "sarif"))
    from .formats import FORMATTERS, View

    errors = sum(c.errors for c in checks)
    warnings = sum(c.warnings for c in checks)
    view = View(resources=args.show_resources, summary=not args.quiet, cuda=workspace.cuda_versions())
    # Files with a compile_commands.json entry are checked for its archs: name what was used.
    report = FORMATTERS[args.format](checks, archs_checked(checks, archs), view)
    if not write_report(report, args.output_file):
        return EXIT_TOOL_FAILED
    if args.exit_zero:
        return EXIT_CLEAN
    incomplete = any(c.incomplete for c in checks)  # not checked in time, out of memory
    return EXIT_FINDINGS if errors or (args.strict and (warnings or incomplete)) else EXIT_CLEAN


def _gpu_off_reason(args: argparse.Namespace, workspace: Workspace, stdin_text: str | None) -> str | None:
    """Why this run verifies nothing on a GPU (None: it does). With Ray the GPUs are the
    cluster's: this machine may have none."""
    if not workspace.settings_for(os.path.abspath(args.paths[0])).gpu_enabled:
        return "--no-gpu" if args.no_gpu else "gpu.enabled is false"
    if absent := workspace.gpu_absence(os.path.abspath(args.paths[0])):
        return absent  # hover's and the editor's words
    if stdin_text is not None:
        return "read from stdin"
    return None


class _Progress:
    """Files as they finish, on stderr: with -v one line each; else, in a terminal, one progress
    line rewritten in place (and cleared at the end); nothing with -q or into a pipe."""

    def __init__(self, verbose: bool, quiet: bool):
        self.verbose = verbose and not quiet
        self.live = not quiet and not verbose and sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: FileDone) -> None:
        if self.verbose:
            print(file_line(done), file=sys.stderr, flush=True)
        elif self.live:
            line = f"kernel-lsp: {done.done}/{done.total} files: {os.path.relpath(done.check.path)}"
            sys.stderr.write("\r\033[K" + line[:120])
            sys.stderr.flush()
            self.shown = True

    def end(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _check_stdin(path: str, text: str, workspace: Workspace) -> list[FileCheck] | None:
    """The text from stdin, checked as the file `path` (which need not exist): its folder's
    pyproject.toml and compile_commands.json, its spec, a header's includers on disk."""
    if not path.endswith(CUDA_SUFFIXES):
        print(f"kernel-lsp: not a CUDA file (.cu or .cuh): {path}", file=sys.stderr)
        return None
    _load_the_rest()
    # In a worker under the file's deadline and memory limit, as every file of a run.
    scheduler = CheckScheduler(1)
    try:
        return [scheduler.check(workspace.text_request(path, text), workspace, tool_errors=True).result()]
    finally:
        scheduler.close()


def write_report(report: str, output_file: str | None) -> bool:
    """The report on stdout, or in `output_file` (its folder made when missing). False, with a
    message, when it cannot be written."""
    text = report + "\n" if report else ""  # --quiet on a clean run: nothing at all
    if output_file is None:
        write_stdout(text)
        return True
    try:
        folder = os.path.dirname(os.path.abspath(output_file))
        os.makedirs(folder, exist_ok=True)
        with open(output_file, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"kernel-lsp: cannot write {output_file}: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def _quiet(_line: str) -> None:
    pass


def _specs_read_only(checks: list[FileCheck], workspace: Workspace, asked: str) -> list[FileCheck]:
    """Mark the files whose specs were read and not run as unverified, saying why (once on
    stderr too); return the others, which a GPU may verify."""
    rest, reasons = [], set()
    for c in checks:
        why = specs_not_run_reason(workspace.settings_for(c.path), asked)
        if why and os.path.exists(spec_path_for(c.path)):
            reasons.add(why)
            workspace.unverified([c], f"specs not run: {why}")
        else:
            rest.append(c)
    for why in sorted(reasons):
        print(f"kernel-lsp: specs were read, not run ({why})", file=sys.stderr)
    return rest


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def kernel_seconds(k: KernelCheck) -> str:
    """`4.21 s: inputs+reference 2.03, verify 0.61, ...`: a kernel's verification time and the
    phases it went to (the larger ones, in the order they ran)."""
    total = float(getattr(k, "duration_s", 0.0) or 0.0)
    phases = getattr(k, "phases", None) or {}
    shown = [f"{name} {s:.2f}" for name, s in phases.items() if s >= 0.005]
    return f"{total:.2f} s" + (f": {', '.join(shown)}" if shown else "")


def file_line(d: FileDone) -> str:
    """`-v`'s line for a finished file: `[7/39] dot/dot_bf16.cu: GPU 1: dot ok (4.21 s: inputs+reference
    2.03, verify 0.61, ...)`, or its
    compile findings when nothing ran on a GPU."""
    head = f"kernel-lsp: [{d.done}/{d.total}] {os.path.relpath(d.check.path)}"
    c = d.check
    if c.gpu_checks:
        kernels = ", ".join(f"{k.kernel or '?'} {k.status} ({kernel_seconds(k)})" for k in c.gpu_checks)
        return f"{head}: {d.gpu}: {kernels}" if d.gpu else f"{head}: {kernels}"
    if not c.checked:
        return f"{head}: not checked"
    found = f"{c.errors} error(s), {c.warnings} warning(s), {len(c.kernels)} kernel(s)"
    return f"{head}: {found}" + (f"; not verified: {c.unverified}" if c.unverified else "")
