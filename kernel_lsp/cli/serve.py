"""`kernel-lsp [serve]`: the language server over stdio, or --tcp HOST:PORT."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import sys

from .. import __version__
from .exit_codes import EXIT_CLEAN, EXIT_TOOL_FAILED

COMMANDS_HELP = """\
commands (each takes --help):
  kernel-lsp check PATH...           compile .cu/.cuh files (folders recursively) and report
                                     findings; with a GPU, verify and time kernels that have a
                                     spec. One summary line when clean. Exit 0 clean, 1 findings,
                                     2 the tool failed. Main options:
        --format text|json|sarif|github   -o/--output-file FILE   -q/--quiet   --exit-zero
        --strict (warnings fail too)   --select/--ignore CODES   -v/--show-resources
        --stdin-filename PATH (check stdin as PATH)   --no-gpu   --arch sm_90 (repeatable)
        -I DIR   -D NAME=VALUE   -j N   --watch   --force-exclude   --max-file-bytes N
                                     (`kernel-lsp --check PATH...` is the same command)
  kernel-lsp bench FILE [--kernel K] verify on the GPU, then a latency table per kernel and size
  kernel-lsp optimize FILE [--kernel K] [--proposer llm|tune] [--apply]
                                     FSR: propose, compile, verify, time; offer the fastest
                                     correct candidate as a diff
  kernel-lsp spec FILE [--kernel K] [--force]
                                     write a spec skeleton FILE's stem.spec.py beside it

Settings come from [tool.kernel-lsp] in the nearest pyproject.toml; flags override them."""

# clangd's behaviour: someone who typed `kernel-lsp` in a terminal learns what it is waiting for.
TERMINAL_HINT = (
    "kernel-lsp: LSP server on stdio; editors start it. "
    "For the command line: kernel-lsp check PATH... (kernel-lsp --help)"
)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed or replaced stdin
        return False


class _VersionAction(argparse.Action):
    """`--version`: kernel-lsp's, then the CUDA it compiles with (NVRTC, and nvcc with where it
    comes from). Asked only when printed: a server start loads neither."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from ..workspace import Workspace

        print(f"kernel-lsp {__version__}\n{Workspace.cuda_versions().describe()}", flush=True)
        parser.exit()


def serve_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kernel-lsp",
        description="CUDA language server (LSP over stdio by default) and command-line checks.",
        epilog=COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help="serve over TCP instead of stdio, on a loopback address only; the editor must send the "
        "token as initializationOptions.token",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="with --tcp: the token, in a file only you can read (made, mode 0600, when missing); "
        "default: a new token, printed on stderr",
    )
    p.add_argument("--log-file", help="write the server log here")
    p.add_argument("--log-level", default="INFO")
    p.add_argument(
        "--version",
        action=_VersionAction,
        help="print kernel-lsp's version and the NVRTC and nvcc it compiles with, then exit",
    )
    args = p.parse_args(argv)
    if not args.tcp and _stdin_is_terminal():
        print(TERMINAL_HINT, file=sys.stderr, flush=True)  # and serve on: an editor may be behind it
    if args.log_file:
        handler: logging.Handler = logging.FileHandler(args.log_file)
    else:
        # The server sends its log to the editor (window/logMessage, each line at its level);
        # editors show stderr as errors, so stderr carries the errors only (and pygls' own debug
        # lines at --log-level DEBUG, which cannot go through the protocol they describe).
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(_errors_only)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[handler],
    )
    if not args.log_level.upper().startswith("DEBUG"):
        # pygls logs every message it sends at INFO: keep the log for what the server does.
        logging.getLogger("pygls").setLevel(logging.WARNING)
    # watchdog logs every inotify event at DEBUG: with the log inside the workspace, each line
    # written was an event, logged, written... (7 MB/s).
    logging.getLogger("watchdog").setLevel(logging.INFO)
    early = None
    if not args.tcp:
        # `initialize` answered (when an earlier start saved the answer) before pygls loads.
        from ..early_initialize import answer_early

        early = answer_early(sys.stdin.buffer, sys.stdout.buffer)
    from ..server import serve

    log_file = os.path.abspath(args.log_file) if args.log_file else None
    if args.tcp:
        return _serve_tcp(args.tcp, args.token_file, functools.partial(serve, log_file=log_file))
    if args.token_file:
        print("kernel-lsp: --token-file goes with --tcp", file=sys.stderr)
        return EXIT_TOOL_FAILED
    _exit_now(serve(log_file=log_file, early=early))
    return EXIT_CLEAN


def _errors_only(record: logging.LogRecord) -> bool:
    pygls_chatter = record.name.split(".", 1)[0] == "pygls" and record.levelno < logging.WARNING
    return record.levelno >= logging.ERROR or pygls_chatter


def _exit_now(code: int) -> None:
    """End the process once the server is done and its workers are ended: the interpreter would
    join every thread first, and one blocked in a read (a FIFO, stdin) held it forever."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _serve_tcp(address: str, token_file: str | None, serve) -> int:
    from ..server import TcpSetupError, check_loopback, load_token

    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        print("kernel-lsp: --tcp expects HOST:PORT", file=sys.stderr)
        return EXIT_TOOL_FAILED
    try:
        check_loopback(host)
        token, made = load_token(token_file)
    except TcpSetupError as e:
        print(f"kernel-lsp: {e}", file=sys.stderr)
        return EXIT_TOOL_FAILED

    def listening(addresses) -> None:
        where = ", ".join(f"{a[0]}:{a[1]}" for a in addresses)
        if token_file:
            told = f"the token is in {token_file}" + (" (new)" if made else "")
        else:
            told = f"token: {token}"
        print(
            f"kernel-lsp: listening on {where}; {told}; editors send it as initializationOptions.token",
            file=sys.stderr,
            flush=True,
        )

    _exit_now(serve(tcp=(host, int(port)), token=token, on_listening=listening))
    return EXIT_CLEAN
