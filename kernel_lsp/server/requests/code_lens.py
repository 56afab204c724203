"""textDocument/codeLens: one headline above each kernel — the GPU figures when it was checked on
a GPU, else its compile resources — and, once a kernel is profiled, one lens on each of its
hottest lines ("31% of stall samples: long scoreboard").

A template's instances get their resources where the template is written: on its line in the
header, from every file that instantiated it (the analysis' definition index), and on the line of
each instance file that leads to it (its explicit instantiation, else its #include). A line with
more instances than a few gets one summary lens (count, register and occupancy ranges); hover
lists them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from ...api.model import KernelResources
    from ..snapshot import DocumentSnapshot

# More instances than this on one line: one summary lens instead of a lens each.
LENSES_PER_LINE = 3


def compile_headline(k) -> str:
    parts = [f"{k.registers} regs"]
    if k.spills:
        parts.append(f"spills {k.spill_store_bytes}/{k.spill_load_bytes} B")
    if k.shared_bytes:
        parts.append(f"{k.shared_bytes} B smem")
    if k.occupancy:
        parts.append(f"{k.occupancy.fraction:.0%} occupancy @{k.occupancy.block_size}")
    return " · ".join(parts) + f" · {k.arch}"


def span(values: list, fmt=str) -> str:
    """`24–40`, or `32` when all agree."""
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def instances_summary(kernels: list[KernelResources]) -> str:
    """One line for many instances: `12 instances: 24–40 regs · 50%–75% occupancy · sm_90`
    (`kernels` where they are of several functions: a library's, brought in by one #include)."""
    names = {k.name for k in kernels}
    what = "instances" if len({k.source_function for k in kernels}) == 1 else "kernels"
    parts = [f"{len(names)} {what}: {span([k.registers for k in kernels])} regs"]
    spilling = {k.name for k in kernels if k.spills}
    if spilling:
        parts.append(f"{len(spilling)} spill")
    occupancies = [k.occupancy.fraction for k in kernels if k.occupancy]
    if occupancies:
        parts.append(f"{span(occupancies, lambda f: f'{f:.0%}')} occupancy")
    parts.append(", ".join(sorted({k.arch for k in kernels})))
    return " · ".join(parts)


def _distinct(kernels: list[KernelResources]) -> list[KernelResources]:
    """One per instance name (several files may compile the same instance; the first arch)."""
    seen: dict[str, KernelResources] = {}
    for k in kernels:
        seen.setdefault(k.name, k)
    return list(seen.values())


def _lens(line: int, title: str) -> types.CodeLens:
    pos = types.Position(line=line - 1, character=0)
    return types.CodeLens(
        range=types.Range(start=pos, end=pos), command=types.Command(title=title, command="")
    )


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls, params: types.CodeLensParams) -> list[types.CodeLens]:
        snapshot = await ls.document_snapshot(params.text_document.uri)
        return code_lenses(snapshot) if snapshot is not None else []


def code_lenses(snapshot: DocumentSnapshot) -> list[types.CodeLens]:
    """The lenses of one document: headlines above its kernels and host entries, its templates'
    instances compiled elsewhere, its hottest lines."""
    check, gpu = snapshot.check, snapshot.gpu
    by_line: dict[int, list[KernelResources]] = {}
    for k in check.kernels if check else ():
        if k.line:
            by_line.setdefault(k.line, []).append(k)
    # Instances other files compiled from templates written here.
    elsewhere = [k for _, k in snapshot.instances_elsewhere]
    foreign = {id(k) for k in elsewhere}
    for k in elsewhere:
        by_line.setdefault(k.defined_at, []).append(k)
    lenses = []
    for line, kernels in sorted(by_line.items()):
        all_archs = kernels
        kernels = _distinct(kernels)
        if len(kernels) > LENSES_PER_LINE:
            lenses.append(_lens(line, instances_summary(all_archs)))
            continue
        for k in kernels:
            title = gpu.headline(k.name) or compile_headline(k)
            # Named where a line holds several, or where the instance was compiled elsewhere.
            if len(kernels) > 1 or k.defined_in or id(k) in foreign:
                title = f"{k.qualified_name}: {title}"
            lenses.append(_lens(line, title))
    lenses += _entry_lenses(snapshot)
    if not lenses and check is None:
        return []
    from ..profile_view import hot_line_lenses  # loaded on first use, not at the server's start

    return lenses + hot_line_lenses(gpu.hot_lines, snapshot.path)


def _entry_lenses(snapshot: DocumentSnapshot) -> list[types.CodeLens]:
    """The headline of each checked host entry, above its function."""
    from ...api.sources import find_host_function

    lenses = []
    for name in snapshot.gpu.entries:
        function = find_host_function(snapshot.text, name)
        title = snapshot.gpu.headline(name)
        if function is None or not title:
            continue
        lenses.append(_lens(function.line, title))
    return lenses
