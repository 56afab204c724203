"""Compile-time parameters and launch lines as the tuner sees them.

A tuner candidate is an ordinary `.cu` text: the chosen values are written into the file's own
`#define NAME value` defaults (or a guarded `#define` is added under the tune line), so the winning
configuration comes back as a plain diff of the `.cu` and needs no compiler flags to reproduce.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kernel_lsp.constants import macro_values
from kernel_lsp.host_launch.spec_launch import with_host_launches
from kernel_lsp.host_launch.tunables import current_value, is_constant_key, set_constant, site_of
from kernel_lsp.source import LaunchDirective, parse_directives
from kernel_lsp.spec import SpecError, launch_dims

# The pseudo-parameter the tuner uses for a literal launch block size (`block=256`).
LAUNCH_BLOCK = "launch.block"


def define_values(source: str, defines: tuple[str, ...] = ()) -> dict[str, int]:
    """Integer constants of the file (`#define BLOCK 256`, `constexpr int kTile = 32;`), overridden
    by -D values, for evaluating launch expressions such as `cdiv(n, BLOCK*ITEMS)`: the one reader
    in kernel_lsp.constants (the first `#define` of a name wins, as with an `#ifndef` guard)."""
    return macro_values(source, defines)


def current_config(
    source: str, space: Mapping[str, tuple[str, ...]], defines: tuple[str, ...] = ()
) -> dict[str, str]:
    """The configuration the file is written with: each tunable's default, else its first value."""
    values = define_values(source, defines)
    config = {}
    for name, options in space.items():
        if name == LAUNCH_BLOCK:
            launch = _first_literal_launch(source)
            config[name] = launch.block.strip() if launch else options[0]
        elif is_constant_key(name):
            current = current_value(source, name)
            config[name] = current if current in options else options[0]
        elif name in values and str(values[name]) in options:
            config[name] = str(values[name])
        else:
            config[name] = options[0]
    return config


def apply_config(source: str, config: Mapping[str, str]) -> str:
    """The source with each tunable's default set to the configuration's value."""
    out = source
    for name, value in config.items():
        if name == LAUNCH_BLOCK:
            out = _set_launch_block(out, value)
            continue
        site = site_of(name, source)
        if site is not None:  # `threads@12`: a constant of the code, rewritten in place
            out = set_constant(out, site, value)
            continue
        pattern = re.compile(
            rf"^(?P<head>[ \t]*#[ \t]*define[ \t]+{re.escape(name)})(?P<gap>[ \t]+)(?P<value>[^\n/]*?)(?P<tail>[ \t]*(//[^\n]*)?)$",
            re.M,
        )
        m = pattern.search(out)
        out = (
            out[: m.start("value")] + value + out[m.end("value") :] if m else _insert_define(out, name, value)
        )
    return out


def _insert_define(source: str, name: str, value: str) -> str:
    """Add `#ifndef NAME / #define NAME value / #endif` after the tune line (or at the top)."""
    lines = source.splitlines(keepends=True)
    at = 0
    for i, line in enumerate(lines):
        if re.search(r"//\s*kernel-lsp:\s*tune\b", line):
            at = i + 1
    block = f"#ifndef {name}\n#define {name} {value}\n#endif\n"
    return "".join(lines[:at]) + block + "".join(lines[at:])


def _first_literal_launch(source: str) -> LaunchDirective | None:
    for launch in parse_directives(source).launches:
        if re.fullmatch(r"\d+", launch.block.strip()):
            return launch
    return None


def launch_block_space(source: str, kernels: list[str]) -> tuple[str, ...] | None:
    """Block sizes to try when the launch line gives a literal block size that its grid repeats
    (`grid=cdiv(n, 256) block=256`) and no tunable covers it; None otherwise."""
    launches = [d for d in parse_directives(source).launches if d.kernel in kernels]
    if len(launches) != 1:
        return None
    block = launches[0].block.strip()
    if not re.fullmatch(r"\d+", block) or not re.search(rf"\b{block}\b", launches[0].grid):
        return None
    sizes = ["64", "128", "256", "512", "1024"]
    if block not in sizes:
        sizes.append(block)
    return tuple(sorted(sizes, key=int))


def _set_launch_block(source: str, value: str) -> str:
    launch = _first_literal_launch(source)
    if launch is None:
        return source
    lines = source.splitlines(keepends=True)
    old = launch.block.strip()
    line = lines[launch.line - 1]
    lines[launch.line - 1] = re.sub(rf"\b{old}\b", value, line)
    return "".join(lines)


def launches_for(source: str, kernels: list[str], defines: tuple[str, ...] = ()) -> list[LaunchDirective]:
    """The launch lines of `kernels`: their launch comments, else their launches in host code."""
    directives = with_host_launches(parse_directives(source), source, kernels, defines)
    return [d for k in kernels for d in directives.launches_of(k)]


def launch_shapes(
    source: str, kernels: list[str], sizes: Mapping[str, Any], defines: tuple[str, ...] = ()
) -> dict[str, tuple[tuple[int, int, int], tuple[int, int, int], int]]:
    """{kernel: (grid, block, smem)} for the launch lines of `kernels`, evaluated at `sizes` with
    the file's integer macros. Raises SpecError when an expression cannot be evaluated."""
    scope = {**define_values(source, defines), **dict(sizes)}
    out = {}
    for d in launches_for(source, kernels, defines):
        try:
            out[d.kernel] = launch_dims(d.grid, d.block, d.smem, scope)
        except SpecError:
            raise
        except Exception as e:  # NameError and friends from a user's expression
            raise SpecError(f"{d.described}: {type(e).__name__}: {e}") from None
    return out
