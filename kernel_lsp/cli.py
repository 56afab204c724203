"""Command line: `kernel-lsp` serves LSP (stdio, or --tcp HOST:PORT); `kernel-lsp --check PATH...`
checks files for pre-commit and CI; `bench`, `optimize` and `spec` are sub-commands.

Exit codes of --check (ruff's convention): 0 no errors, 1 errors (or warnings with --strict),
2 the tool itself failed (bad arguments, a path that does not exist or is not CUDA, no CUDA files
found, NVRTC missing)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import sys
from dataclasses import replace

from . import __version__
from .check import FileCheck, collect_files, drop_repeated, includers_for, job_deadline
from .check_jobs import lean_check_path
from .compile import JOB_TIMEOUT_S, MAX_FILE_BYTES
from .compile.jobs import JobFailed, run_jobs
from .config import Settings, find_pyproject, settings_from_dict, settings_from_pyproject
from .evaluation.pool import gpus_arg
from .model import Diagnostic, Severity
from .spec import spec_path_for

EXIT_CLEAN, EXIT_FINDINGS, EXIT_TOOL_FAILED = 0, 1, 2


def _add_compile_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--arch",
        action="append",
        help="target arch, e.g. sm_90 (repeatable; default: local GPU's, else sm_90)",
    )
    p.add_argument("-I", "--include", action="append", default=None, help="extra include folder (repeatable)")
    p.add_argument(
        "-D",
        "--define",
        action="append",
        default=None,
        help="macro NAME or NAME=value (repeatable)",
    )
    p.add_argument(
        "--default-device", action="store_true", default=None, help="pass -default-device to NVRTC"
    )
    p.add_argument(
        "--compiler",
        choices=["auto", "nvrtc", "nvcc"],
        default=None,
        help="compile backend (default auto: NVRTC for device-only files, nvcc for files with host code)",
    )
    p.add_argument(
        "--host-check",
        action="store_true",
        default=None,
        help="with nvcc, also compile the host side (nvcc -c) so the host compiler's errors show",
    )
    p.add_argument("--config", help="pyproject.toml to read [tool.kernel-lsp] from (default: nearest)")
    p.add_argument(
        "--compile-commands",
        metavar="PATH",
        help="compile_commands.json (or its folder) to take flags from (default: searched upward from each file)",
    )


def add_backend_flags(p: argparse.ArgumentParser) -> None:
    """--backend and --ray-address, shared by --check, bench and optimize."""
    p.add_argument(
        "--backend",
        choices=("auto", "local", "ray"),
        help="where GPU work runs: this machine's GPUs (local) or one Ray actor per GPU of a cluster "
        "(ray); default: the evaluation.backend setting, else Ray only when a cluster address is given",
    )
    p.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="the Ray cluster to join (default: cluster.address, else RAY_ADDRESS; none: start a local one)",
    )


def with_backend_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    if getattr(args, "backend", None):
        settings = replace(settings, evaluation_backend=args.backend)
    if getattr(args, "ray_address", None):
        settings = replace(settings, cluster_address=args.ray_address)
    return settings


def resolve_settings(args: argparse.Namespace, anchor: str) -> tuple[Settings, list[str]]:
    config = args.config or find_pyproject(anchor)
    settings, problems = settings_from_pyproject(config) if config else (Settings(), [])
    flags = {}
    if args.arch:
        flags["arch"] = [a for v in args.arch for a in v.replace(",", " ").split()]
    if args.include:
        flags["includeDirs"] = [os.path.abspath(d) for d in args.include]
    if args.define:
        flags["defines"] = args.define
    if args.default_device:
        flags["defaultDevice"] = True
    if getattr(args, "compiler", None):
        flags["compiler"] = args.compiler
    if getattr(args, "host_check", None):
        flags["hostCheck"] = True
    if getattr(args, "compile_commands", None):
        flags["compileCommands"] = os.path.abspath(args.compile_commands)
    settings, more = settings_from_dict(flags, settings)
    return settings, problems + more


def run_checks(files: list[str], settings: Settings, jobs: int) -> list[FileCheck]:
    # NVRTC serialises compiles inside one process, so parallel files need processes; a spec
    # sidecar runs the user's code, which only a worker process can be stopped in.
    has_spec = any(os.path.exists(spec_path_for(f)) for f in files if f.endswith(".cu"))
    # A header that does not compile alone is checked as the file that includes it sees it.
    context = includers_for(files, settings)
    if (jobs <= 1 or len(files) <= 1) and not has_spec:
        return [lean_check_path(f, settings, includers=context.get(f, ())) for f in files]
    jobs_args = [(f, settings, None, None, context.get(f, ())) for f in files]
    results = run_jobs(lean_check_path, jobs_args, jobs, job_deadline(settings))
    return [_job_check(f, r) for f, r in zip(files, results, strict=True)]


def _job_check(path: str, result: FileCheck | JobFailed) -> FileCheck:
    if isinstance(result, FileCheck):
        return result
    if result.reason == "error":  # the engine raised: the tool failed, not the user's code
        raise RuntimeError(f"checking {path}: {result.detail}")
    spec = spec_path_for(path)
    where = spec if os.path.exists(spec) else path
    if result.reason == "timeout":
        message = (
            f"checking {os.path.basename(path)} took over {JOB_TIMEOUT_S:.0f} s and was stopped; "
            "does its spec never return?"
        )
    else:
        message = (
            f"the process checking {os.path.basename(path)} ended ({result.detail}): NVRTC or the "
            "file's spec crashed it"
        )
    return FileCheck(
        path, [Diagnostic(where, 1, 1, Severity.ERROR, message, code=result.reason, source="kernel-lsp")]
    )


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
    _add_compile_flags(p)
    args = p.parse_args(argv)
    settings, problems = resolve_settings(args, args.paths[0])
    if args.no_gpu:
        settings = replace(settings, gpu_enabled=False)
    if args.max_file_bytes is not None:
        settings = replace(settings, max_file_bytes=max(0, args.max_file_bytes))
    settings = with_backend_flags(settings, args)
    for problem in problems:
        print(f"kernel-lsp: config: {problem}", file=sys.stderr)
    from .compile import check_arch, local_gpu_arch

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

        return watch_check_main(args.paths, settings, args.format)
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
    checks = run_checks(files, settings, args.jobs)
    drop_repeated(checks)
    if any(d.code == "nvrtc" for c in checks for d in c.diagnostics):
        print(
            "kernel-lsp: NVRTC could not run; install `cuda-python[all]` and `cuda-toolkit[cudart,cccl]`",
            file=sys.stderr,
        )
        return EXIT_TOOL_FAILED
    from .evaluation.choose import RayUnavailable, wants_ray
    from .gpu_check import mark_unverified, verify_checks

    # With Ray the GPUs are the cluster's: this machine may have none.
    if not settings.gpu_enabled:
        mark_unverified(checks, "--no-gpu" if args.no_gpu else "gpu.enabled is false")
    elif not (wants_ray(settings.evaluation_backend, settings.cluster_address) or local_gpu_arch()):
        mark_unverified(checks, "no GPU found")
    else:
        try:
            verify_checks(checks, settings, log=_stderr, profile=args.occupancy, gpus=args.gpus)
        except RayUnavailable as e:
            print(f"kernel-lsp: {e}", file=sys.stderr)
            return EXIT_TOOL_FAILED
    from .formats import FORMATTERS

    # Files with a compile_commands.json entry are checked for its archs: name what was used.
    used = sorted({r.arch for c in checks for r in c.results} - set(archs))
    errors = sum(c.errors for c in checks)
    warnings = sum(c.warnings for c in checks)
    write_stdout(FORMATTERS[args.format](checks, archs + used) + "\n")
    # A file not checked in time is information, not a finding; --strict asks for every file.
    timed_out = any(c.timed_out for c in checks)
    return EXIT_FINDINGS if errors or (args.strict and (warnings or timed_out)) else EXIT_CLEAN


def write_stdout(text: str) -> None:
    """Write and flush now, so that a reader that went away (`| head -1`) is noticed here."""
    sys.stdout.write(text)
    sys.stdout.flush()


COMMANDS_HELP = """\
commands (each takes --help):
  kernel-lsp --check PATH...         compile .cu/.cuh files (folders recursively) with NVRTC and
                                     report findings and per-kernel resources; with a GPU, verify
                                     and time kernels that have a spec. Exit 0 clean, 1 findings,
                                     2 the tool failed. Main options:
        --format text|json|sarif|github   --strict (warnings fail too)   --no-gpu
        --arch sm_90 (repeatable)   -I DIR   -D NAME=VALUE   -j N   --watch
        --max-file-bytes N   --force-exclude (excludes hold for files named too)
  kernel-lsp bench FILE [--kernel K] verify on the GPU, then a latency table per kernel and size
  kernel-lsp optimize FILE [--kernel K] [--proposer llm|tune] [--apply]
                                     FSR: propose, compile, verify, time; offer the fastest
                                     correct candidate as a diff
  kernel-lsp spec FILE [--kernel K] [--force]
                                     write a spec skeleton FILE's stem.spec.py beside it

Settings come from [tool.kernel-lsp] in the nearest pyproject.toml; flags override them."""


def serve_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kernel-lsp",
        description="CUDA language server (LSP over stdio by default) and command-line checks.",
        epilog=COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tcp", metavar="HOST:PORT", help="serve over TCP instead of stdio")
    p.add_argument("--log-file", help="write the server log here")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--version", action="version", version=f"kernel-lsp {__version__}")
    args = p.parse_args(argv)
    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[handler],
    )
    if not args.log_level.upper().startswith("DEBUG"):
        # pygls logs every message it sends at INFO: keep the log for what the server does.
        logging.getLogger("pygls").setLevel(logging.WARNING)
    from .server import serve

    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit():
            print("kernel-lsp: --tcp expects HOST:PORT", file=sys.stderr)
            return EXIT_TOOL_FAILED
        serve(tcp=(host or "127.0.0.1", int(port)))
    else:
        serve()
    return EXIT_CLEAN


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--check" in argv:
        argv.remove("--check")
        return _guard(check_main, argv)
    if argv and argv[0] == "bench":
        from .bench import bench_main

        return _guard(bench_main, argv[1:])
    if argv and argv[0] == "optimize":
        from optimizer.cli import optimize_main

        return _guard(optimize_main, argv[1:])
    if argv and argv[0] == "spec":
        from .spec_cli import spec_main

        return _guard(spec_main, argv[1:])
    if argv and argv[0] == "serve":
        argv = argv[1:]
    return serve_main(argv)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _guard(fn, argv: list[str]) -> int:
    try:
        return fn(argv)
    except BrokenPipeError as e:
        if _stdout_reader_gone():
            return _reader_gone()
        return _internal_error(e)  # a pipe of ours (a worker's) broke: the tool failed
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:  # argparse: 2 for bad usage
        return e.code if isinstance(e.code, int) else EXIT_TOOL_FAILED
    except Exception as e:  # the tool failed, not the user's code
        return _internal_error(e)


def _internal_error(e: Exception) -> int:
    logging.getLogger("kernel_lsp").error("internal error", exc_info=e)
    print(f"kernel-lsp: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    return EXIT_TOOL_FAILED


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe with no reader left (poll says POLLERR for it on Linux)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no real stdout
        return True


def _reader_gone() -> int:
    """The reader of stdout closed it (`| head -1`): stop quietly, as CLI tools do. Point stdout
    at /dev/null so that the interpreter's flush at exit does not fail a second time; the exit
    status is what a shell reports for a process ended by SIGPIPE."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
