"""The one argument of the per-kernel commands (optimize, write a spec skeleton)."""

from __future__ import annotations

from typing import Any


def uri_and_kernel(args: tuple[Any, ...]) -> tuple[str, str] | None:
    """`{"uri": ..., "kernel": ...}` from a command's arguments, else None. Some clients pass the
    arguments array as one value: `[[{...}]]` is read like `[{...}]`."""
    arg = args[0] if args else {}
    if isinstance(arg, list):
        arg = arg[0] if arg else {}
    if (
        not isinstance(arg, dict)
        or not isinstance(arg.get("uri"), str)
        or not isinstance(arg.get("kernel"), str)
    ):
        return None
    return arg["uri"], arg["kernel"]
