"""Theoretical occupancy of a kernel at the block sizes its launches use: the launch comment (an
override), else each launch read from host code, else the kernel's `__launch_bounds__`. Each
figure says where its block size came from; a launch that gives none says why. Applied to a
compiled artifact after the compile (`with_launch_occupancy`): the compile stage itself reads only
the launch comment."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from .. import archs
from ..compile.artifact import literal_launch_value
from ..compile.demangle import demangle
from ..constants import Constants, read_constants
from ..model import CompileResult, KernelResources, LaunchOccupancy
from ..source import Directives, parse_directives
from .headers import HeaderStamp, quoted_headers, with_headers
from .launches import bounds_threads, parse_host
from .model import HostCode, HostLaunch, launch_matches

_HINTS = ("<<<", "cudaLaunch", "__launch_bounds__", "kernel-lsp: launch")


@functools.lru_cache(maxsize=16)
def host_code(source: str, defines: tuple[str, ...] = (), headers: tuple[HeaderStamp, ...] = ()) -> HostCode:
    """The file's host launches, read once per text and headers (every arch of a check shares
    them)."""
    if not any(h in source for h in _HINTS):
        return HostCode()
    return parse_host(source, defines, headers)


@functools.lru_cache(maxsize=16)
def _constants(source: str, defines: tuple[str, ...], headers: tuple[HeaderStamp, ...] = ()) -> Constants:
    return with_headers(read_constants(source, defines), headers, defines)


def launch_occupancies(
    source: str,
    path: str,
    function: str,
    instance: str,
    template_args: Sequence[str],
    arch: str,
    registers: int,
    static_shared: int,
    directives: Directives,
    comment_block: int | None,
    comment_smem: int | None,
    defines: tuple[str, ...] = (),
    headers: tuple[HeaderStamp, ...] = (),
    other_file: bool = False,
) -> tuple[LaunchOccupancy, ...]:
    """The launch configurations of kernel `instance` (`function` with `template_args`);
    `headers`: the file's quoted includes, whose constants its launches may read. `other_file`:
    `path` is not the file the kernel was compiled from (a header's includer), so its launch
    comment is named with its file."""

    def occupancy(block: int, smem: int = 0):
        return archs.occupancy(arch, block, registers, static_shared, smem)

    comments = directives.launches_of(instance) or directives.launches_of(function)
    if comments:
        at = f"{os.path.basename(path)}:" if other_file else "line "
        where = f"the launch comment at {at}{comments[0].line}"
        if comment_block is None:
            note = f"block=`{comments[0].block}` needs the spec's sizes"
            return (LaunchOccupancy("comment", where, None, None, note),)
        return (
            LaunchOccupancy("comment", where, comment_block, occupancy(comment_block, comment_smem or 0)),
        )
    host = host_code(source, tuple(defines), headers)
    out: list[LaunchOccupancy] = []
    seen: set[tuple[int, int]] = set()
    for launch in host.launches:
        if not launch_matches(launch, instance):
            continue
        entry = _from_host(launch, path, occupancy)
        key = (entry.block_size or 0, _smem(launch))
        if entry.block_size is not None and key in seen:
            continue
        seen.add(key)
        out.append(entry)
    if not any(e.block_size for e in out):
        bounds = host.bounds.get(function)
        if bounds is not None:
            threads = bounds_threads(bounds, _constants(source, tuple(defines), headers), template_args)
            shown = f"__launch_bounds__({bounds.max_threads}{', ' + bounds.min_blocks if bounds.min_blocks else ''})"
            if threads is None:
                out.append(
                    LaunchOccupancy("bounds", shown, None, None, f"`{bounds.max_threads}` has no value here")
                )
            else:
                if str(threads) != bounds.max_threads:
                    shown += f" = {threads}"
                out.insert(0, LaunchOccupancy("bounds", shown, threads, occupancy(threads)))
    return tuple(out)


def _threads(value: int | tuple[int, ...] | None) -> int | None:
    return math.prod(value) if isinstance(value, tuple) else value


def _smem(launch: HostLaunch) -> int:
    v = launch.smem.total
    return v if v is not None else -1


def _from_host(launch: HostLaunch, path: str, occupancy) -> LaunchOccupancy:
    where = launch.where(path)
    block = launch.block.total
    if block is None:
        if launch.block.resolved:
            params = ", ".join(f"`{s}`" for s in launch.block.symbols)
            plural = "s" if len(launch.block.symbols) > 1 else ""
            owner = f" of `{launch.function}`" if launch.function else ""
            note = f"block size `{launch.block.text}` depends on the parameter{plural} {params}{owner}"
        else:
            note = launch.block.reason
        return LaunchOccupancy("host", where, None, None, note)
    smem = launch.smem.total
    note = ""
    if smem is None:
        reason = launch.smem.reason or f"`{launch.smem.describe()}` depends on the launcher's parameters"
        note = f"dynamic shared memory not counted: {reason}"
    return LaunchOccupancy("host", where, block, occupancy(block, smem or 0), note)


def describe_launches(launches: Sequence[LaunchOccupancy], arch: str = "") -> list[str]:
    """One line per launch configuration, for hover and the CLI."""
    return [entry.describe(arch) for entry in launches]


NO_BLOCK = "no launch comment, launch in host code or __launch_bounds__ gives a block size"


def occupancy_summary(k: KernelResources) -> str:
    """One line for the CLI: the first figure and where its block came from, then the others."""
    if not k.launches:
        if k.occupancy:
            return f"occupancy {k.occupancy.describe()}"
        if k.block_size is None:
            return f"occupancy: none ({NO_BLOCK})"
        return f"occupancy: n/a, a block of {k.block_size} threads cannot launch on {k.arch}"
    lines = describe_launches(k.launches, k.arch)
    head = lines[0]
    first = f"occupancy {head}" if k.launches[0].block_size is not None else f"occupancy: unknown, {head}"
    return "; ".join([first, *(f"also {line}" for line in lines[1:])])


def with_launch_occupancy(
    result: CompileResult,
    source: str,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    launchers: Callable[[], Sequence[tuple[str, str]]] = tuple,
) -> CompileResult:
    """`result` with each kernel's launch configurations and, where the launch comment gives no
    block, the first figure from host code or `__launch_bounds__`. Constants come from the file
    and from the project headers it includes (beside it, or in `include_dirs`). `launchers`: the
    (path, text) of the files that include this one (a header), asked only for a kernel the file
    itself gives no block: the first whose own launches of it give one supplies its figures."""
    if not result.kernels:
        return result
    kernels = []
    for k in result.kernels:
        configs = _configs(k, result.path, source, defines, include_dirs, k.block_size)
        if not any(c.block_size for c in configs):
            for path, text in launchers():
                found = _configs(k, path, text, defines, include_dirs, None, other_file=True)
                if any(c.block_size for c in found):
                    configs = found
                    break
        primary = next((c for c in configs if c.block_size is not None), None)
        kernels.append(
            replace(
                k,
                block_size=primary.block_size if primary else None,
                occupancy=primary.occupancy if primary else None,
                launches=configs,
            )
        )
    return replace(result, kernels=kernels)


def _configs(
    k: KernelResources,
    path: str,
    source: str,
    defines: Sequence[str],
    include_dirs: Sequence[str],
    compiled_block: int | None,
    other_file: bool = False,
) -> tuple[LaunchOccupancy, ...]:
    """Kernel `k`'s launch configurations as the file `path` (its text `source`) gives them;
    `compiled_block`: the block the compile read from the launch comment (the compiled file's)."""
    directives = parse_directives(source)
    headers = quoted_headers(source, path, include_dirs) if any(h in source for h in _HINTS) else ()
    parts = demangle(k.mangled)
    function = k.source_function
    instance = parts.instance if parts else function
    comments = directives.launches_of(instance) or directives.launches_of(function)
    smem = literal_launch_value(comments[0].smem, tuple(defines), source) if comments else 0
    comment_block = compiled_block
    if comments and comment_block is None:  # another file's comment: the compile never read it
        comment_block = _threads(literal_launch_value(comments[0].block, tuple(defines), source))
    if comments and headers and (comment_block is None or smem is None):
        # `block=kBlock` with kBlock in a header the file includes: the compile read the file only.
        constants = _constants(source, tuple(defines), headers)
        if comment_block is None:
            comment_block = _threads(constants.evaluate(comments[0].block))
        if smem is None:
            smem = constants.evaluate(comments[0].smem)
    return launch_occupancies(
        source,
        path,
        function,
        instance,
        parts.template_args if parts else (),
        k.arch,
        k.registers,
        k.shared_bytes,
        directives,
        comment_block,
        math.prod(smem) if isinstance(smem, tuple) else smem,
        tuple(defines),
        headers,
        other_file,
    )
