"""`kernel-lsp --check PATH...`: check files for pre-commit and CI.

Exit codes (ruff's convention): 0 no errors, 1 errors (or, with --strict, warnings and files not
checked in time), 2 the tool itself failed (bad arguments, a path that does not exist or is not
CUDA, no CUDA files found, NVRTC missing)."""

from __future__ import annotations

import argparse
import os
import sys

from ..check import FileCheck, collect_files, drop_repeated, failed_check, includers_for, job_deadline
from ..check_jobs import lean_analyze
from ..compile import MAX_FILE_BYTES
from ..compile.jobs import JobFailed, run_jobs
from ..evaluation.pool import gpus_arg
from ..spec import spec_path_for
from ..workspace import Workspace
from .flags import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_TOOL_FAILED,
    add_backend_flags,
    add_compile_flags,
    add_specs_flag,
    specs_not_run_reason,
    specs_overrides,
    workspace_from_args,
    write_stdout,
)


def run_checks(files: list[str], workspace: Workspace, jobs: int) -> list[FileCheck]:
    """Each file in a worker process under its deadline and memory limit (NVRTC serialises
    compiles within a process; a compiler or a spec that hangs can only be stopped there)."""
    settings = workspace.settings
    # A header that does not compile alone is checked as the file that includes it sees it.
    context = includers_for(files, settings)
    # The database flags here, before the workers fork: they inherit the database read once.
    jobs_args = [
        (
            workspace,
            f,
            None,
            None,
            context.get(f, ()),
            workspace.settings_for(f).project_flags(f, workspace.root),
        )
        for f in files
    ]
    _load_the_rest()
    # Checks come back without their CUBINs (lean_analyze): GPU verification compiles again.
    results = run_jobs(lean_analyze, jobs_args, jobs, job_deadline(settings), settings.compile_memory_bytes)
    return [_job_check(f, r, workspace) for f, r in zip(files, results, strict=True)]


def _load_the_rest() -> None:
    """What the checks and check_main need (numpy for specs and GPU verification: ~0.2 s), loaded
    before the workers fork: they inherit it, where they and this process each imported it
    before, and a one-file check costs what it did in process."""
    from .. import gpu_check  # noqa: F401
    from ..evaluation import choose  # noqa: F401
    from . import formats  # noqa: F401


def _job_check(path: str, result: FileCheck | JobFailed, workspace: Workspace) -> FileCheck:
    if isinstance(result, FileCheck):
        return result
    if result.reason == "error":  # the engine raised: the tool failed, not the user's code
        raise RuntimeError(f"checking {path}: {result.detail}")
    return failed_check(path, result, workspace.settings_for(path))


def check_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kernel-lsp --check", description="Compile CUDA files with NVRTC and report findings."
    )
    p.add_argument("paths", nargs="+", help=".cu/.cuh files or folders (searched recursively)")
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text")
    p.add_argument("--strict", action="store_true", help="warnings fail the check too")
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
        help="verify spec'd files in parallel on all visible GPUs or on N of them (default: one)",
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
    args = p.parse_args(argv)
    specs, specs_asked = specs_overrides(args.specs)
    more: dict = {"gpu.enabled": False, **specs} if args.no_gpu else dict(specs)
    if args.max_file_bytes is not None:
        more["maxFileBytes"] = max(0, args.max_file_bytes)
    workspace, problems = workspace_from_args(args, args.paths[0], **more)
    settings = workspace.settings_for(os.path.abspath(args.paths[0]))
    for problem in problems:
        print(f"kernel-lsp: config: {problem}", file=sys.stderr)
    from ..compile import check_arch, local_gpu_arch

    archs = settings.archs()
    bad_arch = [m for a in archs if (m := check_arch(a))]
    if bad_arch:
        print(f"kernel-lsp: {bad_arch[0]}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    selection = collect_files(args.paths, settings.exclude, args.force_exclude)
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
            print(
                f"kernel-lsp: nothing to check: {len(selection.excluded)} file(s) excluded by the "
                "`exclude` setting",
                file=sys.stderr,
            )
            return EXIT_CLEAN
        print(f"kernel-lsp: no .cu or .cuh files found under {' '.join(args.paths)}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    checks = run_checks(files, workspace, args.jobs)
    drop_repeated(checks)
    if any(d.code == "nvrtc" for c in checks for d in c.diagnostics):
        print(
            "kernel-lsp: NVRTC could not run; install `cuda-python[all]` and `cuda-toolkit[cudart,cccl]`",
            file=sys.stderr,
        )
        return EXIT_TOOL_FAILED
    if full := next((d for c in checks for d in c.diagnostics if d.code == "disk-full"), None):
        print(f"kernel-lsp: {full.message.removeprefix('not checked: ')}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    from ..evaluation.choose import RayUnavailable, wants_ray
    from ..evaluation.local import fake_from_env
    from ..gpu_check import mark_unverified, verify_checks

    # Files whose specs were only read (--specs static, CI, their pyproject.toml) are not verified.
    rest = _specs_read_only(checks, workspace, specs_asked)
    # With Ray the GPUs are the cluster's: this machine may have none.
    if not settings.gpu_enabled:
        mark_unverified(rest, "--no-gpu" if args.no_gpu else "gpu.enabled is false")
    elif not (
        wants_ray(settings.evaluation_backend, settings.cluster_address)
        or local_gpu_arch()
        or fake_from_env()
    ):
        mark_unverified(rest, "no GPU found")
    else:
        try:
            verify_checks(rest, workspace, log=_stderr, profile=args.occupancy, gpus=args.gpus)
        except RayUnavailable as e:
            print(f"kernel-lsp: {e}", file=sys.stderr)
            return EXIT_TOOL_FAILED
    from .formats import FORMATTERS

    # Files with a compile_commands.json entry are checked for its archs: name what was used.
    used = sorted({r.arch for c in checks for r in c.results} - set(archs))
    errors = sum(c.errors for c in checks)
    warnings = sum(c.warnings for c in checks)
    write_stdout(FORMATTERS[args.format](checks, archs + used) + "\n")
    incomplete = any(c.incomplete for c in checks)  # not checked in time, out of memory
    return EXIT_FINDINGS if errors or (args.strict and (warnings or incomplete)) else EXIT_CLEAN


def _specs_read_only(checks: list[FileCheck], workspace: Workspace, asked: str) -> list[FileCheck]:
    """Mark the files whose specs were read and not run as unverified, saying why (once on
    stderr too); return the others, which a GPU may verify."""
    from ..gpu_check import mark_unverified

    rest, reasons = [], set()
    for c in checks:
        why = specs_not_run_reason(workspace.settings_for(c.path), asked)
        if why and os.path.exists(spec_path_for(c.path)):
            reasons.add(why)
            mark_unverified([c], f"specs not run: {why}")
        else:
            rest.append(c)
    for why in sorted(reasons):
        print(f"kernel-lsp: specs were read, not run ({why})", file=sys.stderr)
    return rest


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)
