"""Command line: `kernel-lsp` serves LSP (stdio, or --tcp HOST:PORT); `kernel-lsp check PATH...`
checks files for pre-commit and CI (`--check` is its older spelling); `bench`, `optimize` and
`spec` are the other sub-commands. Each front end
is a module of this package; this one only dispatches and turns failures into exit codes."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys

from ..child_python import protect_children
from .exit_codes import EXIT_TOOL_FAILED


def main(argv: list[str] | None = None) -> int:
    protect_children()  # before any worker starts: a repository's modules must not shadow ours
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        from .check import check_main

        return _guard(check_main, argv[1:])
    if "--check" in argv:  # the older spelling of `check`, kept as an alias
        from .check import check_main

        argv.remove("--check")
        return _guard(check_main, argv, "kernel-lsp --check")
    if argv and argv[0] == "bench":
        from .bench import bench_main

        return _guard(bench_main, argv[1:])
    if argv and argv[0] == "optimize":
        from .optimize import optimize_main

        return _guard(optimize_main, argv[1:])
    if argv and argv[0] == "spec":
        from .spec import spec_main

        return _guard(spec_main, argv[1:])
    if argv and argv[0] == "serve":
        argv = argv[1:]
    from .serve import serve_main

    return serve_main(argv)


def _guard(fn, argv: list[str], *more) -> int:
    try:
        return fn(argv, *more)
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
