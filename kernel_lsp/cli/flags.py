"""Flags and settings shared by the command-line front ends: compile flags, GPU backend flags,
settings from pyproject.toml plus flags, exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..api.checks import Settings, gpus_value, parse_overrides
from ..workspace import Workspace
from .exit_codes import EXIT_CLEAN as EXIT_CLEAN  # the commands import them from here
from .exit_codes import EXIT_FINDINGS as EXIT_FINDINGS
from .exit_codes import EXIT_TOOL_FAILED as EXIT_TOOL_FAILED


def gpus_arg(value: str) -> str:
    """argparse type of `--gpus`: `all` or a positive number, else a usage error. Syntax only:
    nothing is asked of the machine while the command line is read."""
    if (text := gpus_value(value)) is None:
        raise argparse.ArgumentTypeError(f"takes `all` or a number of GPUs, not `{value}`")
    return text


def add_compile_flags(p: argparse.ArgumentParser) -> None:
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
        help="compile backend (default auto: nvcc's verdict, NVRTC first where it sees what nvcc sees)",
    )
    p.add_argument(
        "--host-check",
        action="store_true",
        default=None,
        help="nvcc -c (the host pass) also for device-only files; files with host code get it anyway",
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


def backend_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """--backend and --ray-address as settings."""
    out: dict[str, Any] = {}
    if getattr(args, "backend", None):
        out["evaluation.backend"] = args.backend
    if getattr(args, "ray_address", None):
        out["cluster.address"] = args.ray_address
    return out


def compile_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The compile flags as settings (the same keys as `[tool.kernel-lsp]`), over pyproject's."""
    flags: dict[str, Any] = {}
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
    return flags


def workspace_from_args(args: argparse.Namespace, anchor: str, **more: Any) -> tuple[Workspace, list[str]]:
    """The Workspace a command works in: each file's pyproject.toml (or `--config`'s), under the
    command's flags; and what could not be read there (for stderr)."""
    overrides = {**compile_overrides(args), **backend_overrides(args), **more}
    # The flags parsed here, by the front end, into typed settings (the Workspace never sees argparse).
    workspace = Workspace(parse_overrides(overrides), config=getattr(args, "config", None))
    return workspace, workspace.problems(os.path.abspath(anchor))


def resolve_settings(args: argparse.Namespace, anchor: str) -> tuple[Settings, list[str]]:
    """The settings for `anchor` (its pyproject.toml under the flags)."""
    workspace, problems = workspace_from_args(args, anchor)
    return workspace.settings_for(os.path.abspath(anchor)), problems


def add_specs_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--specs",
        choices=("run", "static"),
        help="run each file's spec (the repository's Python: verification, GPU checks) or only read "
        "it (syntax, kernel names); default: run, except when CI is set. A pyproject.toml's "
        'specs.run = "never" holds for its files in any case. Use static for code you do not trust '
        "(pull requests from forks)",
    )


def ci_environment(env: Mapping[str, str]) -> bool:
    """Whether a CI service runs us (GitHub Actions, GitLab, Buildkite... set CI=true)."""
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def specs_overrides(flag: str | None, env: Mapping[str, str] = os.environ) -> tuple[dict[str, str], str]:
    """The `specs.run` override this run asks for, and why specs do not run ("" when they may).
    Running the command is the user's action: specs run, unless `--specs static`, or a CI service
    with no `--specs` given (the code may be a stranger's). A pyproject.toml's `specs.run =
    "never"` holds for its files in any case (a repository may make this stricter, never looser)."""
    if flag == "static":
        return {"specs.run": "never"}, "--specs static"
    if flag is None and ci_environment(env):
        return {"specs.run": "never"}, "CI is set; pass --specs run where the code is trusted"
    return {}, ""


def specs_not_run_reason(settings: Settings, asked: str) -> str:
    """Why a file's specs were read and not run ("" when they ran): the run's reason, else its
    pyproject.toml's."""
    if settings.runs_specs:
        return ""
    return asked or 'specs.run = "never" in pyproject.toml'


def doc_description(doc: str | None) -> str:
    """A command module's first docstring paragraph, for its --help: the whole paragraph (its
    first line alone stopped mid-sentence), as one line that argparse wraps."""
    return " ".join((doc or "").strip().split("\n\n", 1)[0].split())


def write_stdout(text: str) -> None:
    """Write and flush now, so that a reader that went away (`| head -1`) is noticed here."""
    sys.stdout.write(text)
    sys.stdout.flush()
