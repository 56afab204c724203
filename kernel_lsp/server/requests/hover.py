"""textDocument/hover on a kernel's name: its resources per arch, occupancy, and the GPU figures
when the kernel has a spec and a GPU checked it."""

from __future__ import annotations

import re

from lsprotocol import types

from ...host_launch.occupancy import NO_BLOCK, describe_launches
from ...model import KernelResources, format_bytes
from ...source import find_kernels
from ..uris import uri_to_path


def word_at(line: str, character: int) -> str | None:
    for m in re.finditer(r"[A-Za-z_]\w*", line):
        if m.start() <= character <= m.end():
            return m.group(0)
    return None


def resources_markdown(name: str, kernels: list[KernelResources], compiler: str = "nvrtc") -> str:
    # Template instances and overloads share the word under the cursor: a row each, named.
    several = len({k.name for k in kernels}) > 1
    rows = [
        ("| kernel " if several else "")
        + "| arch | registers | static smem | stack | spill st/ld | occupancy |",
        ("|---" if several else "") + "|---|---|---|---|---|---|",
    ]
    for k in kernels:
        occ = "n/a (see the launches below)" if k.launches else f"n/a ({NO_BLOCK})"
        if k.occupancy:
            occ = k.occupancy.describe()
        elif k.block_size:
            occ = f"n/a: a block of {k.block_size} threads cannot launch on {k.arch}"
        rows.append(
            (f"| `{k.name}` " if several else "")
            + f"| {k.arch} | {k.registers} | {format_bytes(k.shared_bytes)} | {format_bytes(k.stack_bytes)} "
            f"| {k.spill_store_bytes} B / {k.spill_load_bytes} B | {occ} |"
        )
    title = name if several or not kernels else kernels[0].name
    return (
        f"**`{title}`** — compiled with {'nvcc' if compiler == 'nvcc' else 'NVRTC'} (theoretical occupancy from the arch's limits)\n\n"
        + "\n".join(rows)
        + launches_markdown(kernels, several)
    )


def launches_markdown(kernels: list[KernelResources], several: bool) -> str:
    """Where each block size came from (a launch in host code, __launch_bounds__, the launch
    comment) and why a launch gives none, for the first arch's figures."""
    firsts: dict[str, KernelResources] = {}
    for k in kernels:
        firsts.setdefault(k.name, k)
    lines = []
    for k in firsts.values():
        label = f"`{k.name}`: " if several else ""
        for entry, text in zip(k.launches, describe_launches(k.launches, k.arch), strict=True):
            if entry.occupancy is not None and entry.occupancy == k.occupancy:
                text = entry.source + (f" ({entry.note})" if entry.note else "")  # the table's figure
            lines.append(f"- {label}{text}")
    if not lines:
        return ""
    arch = next(iter(firsts.values())).arch
    return f"\n\n**Launches** (occupancy on {arch}):\n" + "\n".join(lines)


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: types.HoverParams) -> types.Hover | None:
        path = uri_to_path(params.text_document.uri)
        doc = ls.workspace.get_text_document(params.text_document.uri)
        line = doc.lines[params.position.line] if params.position.line < len(doc.lines) else ""
        name = word_at(line, params.position.character)
        if not name or not path:
            return None
        if name not in {k.name for k in find_kernels(doc.source)}:
            return None
        check = await ls.analysis.latest(path)
        kernels = [k for k in check.kernels if k.source_function == name] if check else []
        parts = []
        if kernels:
            compiler = check.results[0].compiler if check.results else "nvrtc"
            parts.append(resources_markdown(name, kernels, compiler))
        elif check and not check.checked:
            # Too large, binary, unreadable: it will not be compiled, so "not compiled yet" would
            # promise something; say why instead.
            why = check.diagnostics[0].message if check.diagnostics else "the file was not checked"
            parts.append(f"**`{name}`** — no resources: {why}")
        elif check and check.errors:
            parts.append(f"**`{name}`** — no resources: the file does not compile ({check.errors} error(s)).")
        else:
            parts.append(f"**`{name}`** — not compiled yet.")
        for section in ls.hover_sections(path, name):
            parts.append(section)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts))
        )
