"""Command line: `kernel-lsp` serves LSP (stdio, or --tcp HOST:PORT); `kernel-lsp --check PATH...`
checks files for pre-commit and CI; `bench` and `optimize` are sub-commands.

Exit codes of --check (ruff's convention): 0 no errors, 1 errors (or warnings with --strict),
2 the tool itself failed (bad arguments, a path that does not exist, NVRTC missing)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from concurrent.futures import wait
from dataclasses import replace

from . import __version__
from .check import FileCheck, check_path, collect_files, drop_repeated
from .compile import JOB_TIMEOUT_S, compile_pool, end_pool
from .config import Settings, find_pyproject, settings_from_dict, settings_from_pyproject
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
    p.add_argument("--config", help="pyproject.toml to read [tool.kernel-lsp] from (default: nearest)")


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
    settings, more = settings_from_dict(flags, settings)
    return settings, problems + more


def run_checks(files: list[str], settings: Settings, jobs: int) -> list[FileCheck]:
    # NVRTC serialises compiles inside one process, so parallel files need processes; a spec
    # sidecar runs the user's code, which only a worker process can be stopped in.
    has_spec = any(os.path.exists(spec_path_for(f)) for f in files if f.endswith(".cu"))
    if (jobs <= 1 or len(files) <= 1) and not has_spec:
        return [check_path(f, settings) for f in files]
    workers = max(1, min(jobs, len(files)))
    pool = compile_pool(workers)
    try:
        futures = [pool.submit(check_path, f, settings) for f in files]
        wait(futures, timeout=JOB_TIMEOUT_S * math.ceil(len(files) / workers))
        return [fut.result() if fut.done() else _timed_out(f) for f, fut in zip(files, futures, strict=True)]
    finally:
        end_pool(pool)


def _timed_out(path: str) -> FileCheck:
    spec = spec_path_for(path)
    where = spec if os.path.exists(spec) else path
    message = f"checking {os.path.basename(path)} took over {JOB_TIMEOUT_S:.0f} s and was stopped; does its spec never return?"
    return FileCheck(
        path, [Diagnostic(where, 1, 1, Severity.ERROR, message, code="timeout", source="kernel-lsp")]
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
        help="with a GPU and ncu: read each verified kernel's achieved occupancy (seconds per kernel)",
    )
    p.add_argument(
        "--gpus",
        metavar="all|N",
        help="verify spec'd files in parallel on all visible GPUs or on N of them (default: one)",
    )
    add_backend_flags(p)
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--watch", action="store_true", help="re-check on change, printing only what changed")
    _add_compile_flags(p)
    args = p.parse_args(argv)
    settings, problems = resolve_settings(args, args.paths[0])
    if args.no_gpu:
        settings = replace(settings, gpu_enabled=False)
    settings = with_backend_flags(settings, args)
    for problem in problems:
        print(f"kernel-lsp: config: {problem}", file=sys.stderr)
    from .compile import check_arch, local_gpu_arch

    archs = settings.archs()
    bad_arch = [m for a in archs if (m := check_arch(a))]
    if bad_arch:
        print(f"kernel-lsp: {bad_arch[0]}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    files, missing = collect_files(args.paths, settings.exclude)
    for m in missing:
        print(f"kernel-lsp: no such file or folder: {m}", file=sys.stderr)
    if missing:
        return EXIT_TOOL_FAILED
    if args.watch:
        from .watch import watch_check_main

        return watch_check_main(args.paths, settings, args.format)
    checks = run_checks(files, settings, args.jobs)
    drop_repeated(checks)
    if any(d.code == "nvrtc" for c in checks for d in c.diagnostics):
        print(
            "kernel-lsp: NVRTC could not run; install `cuda-python[all]` and `cuda-toolkit[cudart,cccl]`",
            file=sys.stderr,
        )
        return EXIT_TOOL_FAILED
    from .evaluation.choose import RayUnavailable, wants_ray

    # With Ray the GPUs are the cluster's: this machine may have none.
    if settings.gpu_enabled and (
        wants_ray(settings.evaluation_backend, settings.cluster_address) or local_gpu_arch()
    ):
        from .gpu_check import verify_checks

        try:
            verify_checks(checks, settings, log=_stderr, profile=args.occupancy, gpus=args.gpus)
        except RayUnavailable as e:
            print(f"kernel-lsp: {e}", file=sys.stderr)
            return EXIT_TOOL_FAILED
    from .formats import FORMATTERS

    print(FORMATTERS[args.format](checks, archs))
    errors = sum(c.errors for c in checks)
    warnings = sum(c.warnings for c in checks)
    return EXIT_FINDINGS if errors or (args.strict and warnings) else EXIT_CLEAN


def serve_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kernel-lsp", description="CUDA language server (stdio by default).")
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
    if argv and argv[0] == "serve":
        argv = argv[1:]
    return serve_main(argv)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _guard(fn, argv: list[str]) -> int:
    try:
        return fn(argv)
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:  # argparse: 2 for bad usage
        return e.code if isinstance(e.code, int) else EXIT_TOOL_FAILED
    except Exception as e:  # the tool failed, not the user's code
        logging.getLogger("kernel_lsp").exception("internal error")
        print(f"kernel-lsp: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_TOOL_FAILED


if __name__ == "__main__":
    sys.exit(main())
