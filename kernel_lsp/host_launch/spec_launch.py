"""The default launch of a kernel spec: a kernel without a `// kernel-lsp: launch` comment is
launched as the file's own host code launches it, as expressions over the kernel's parameters
(the spec's sizes: where the launcher passes `length` to the kernel's `n`, the size is `n`).
The launch comment stays an override."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..source import Directives, LaunchDirective
from .model import HostLaunch
from .occupancy import host_code


def spec_launch(launch: HostLaunch, kernel: str, path: str = "") -> LaunchDirective | None:
    """`launch` as a launch line of `kernel`, or None when it does not read as one."""
    terms = launch.in_kernel_terms
    if terms is None or not terms.resolved:
        return None
    grid, block, smem = terms.grid.python(), terms.block.python(), terms.smem.python()
    if grid is None or block is None or smem is None:
        return None
    return LaunchDirective(kernel, grid, block, smem, launch.line, origin=launch.where(path))


def with_host_launches(
    directives: Directives, source: str, kernels: Sequence[str], defines: Sequence[str] = (), path: str = ""
) -> Directives:
    """`directives` with, for each of `kernels` that has no launch comment, one launch line per
    launch of it in host code that reads over its parameters (in source order), and a note
    saying why for a kernel whose host launches all fail to."""
    missing = [k for k in dict.fromkeys(kernels) if not directives.launches_of(k)]
    if not missing:
        return directives
    host = host_code(source, tuple(defines))
    added: list[LaunchDirective] = []
    notes: dict[str, str] = {}
    for kernel in missing:
        launches = host.launches_of(kernel)
        usable = [d for d in (spec_launch(x, kernel, path) for x in launches) if d is not None]
        added += usable
        if launches and not usable:
            reasons = [
                f"{x.where(path)}: {x.in_kernel_terms.reasons[0]}"
                for x in launches
                if x.in_kernel_terms and x.in_kernel_terms.reasons
            ]
            notes[kernel] = "; ".join(reasons[:3])
    return replace(directives, launches=directives.launches + added, host_notes=notes)
