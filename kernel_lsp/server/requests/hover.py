"""textDocument/hover on a kernel's name: its resources per arch, occupancy, and the GPU figures
when the kernel has a spec and a GPU checked it. On a template, its instances — compiled by this
file or by the files that include it — with their range of registers and occupancy."""

from __future__ import annotations

import os
import re

from lsprotocol import types

from ...formats import format_bytes
from ...model import KernelResources
from ...source import find_kernels
from ..uris import uri_to_path
from .code_lens import span

# Rows shown in a hover's table; more instances are counted, not listed.
INSTANCE_ROWS = 20


def word_at(line: str, character: int) -> str | None:
    for m in re.finditer(r"[A-Za-z_]\w*", line):
        if m.start() <= character <= m.end():
            return m.group(0)
    return None


def resources_markdown(
    name: str, kernels: list[KernelResources], compiler: str = "nvrtc", sources: tuple[str, ...] = ()
) -> str:
    """`sources`: the files that compiled instances of a template written elsewhere."""
    # Template instances and overloads share the word under the cursor: a row each, named.
    names = sorted({k.name for k in kernels})
    several = len(names) > 1
    rows = [
        ("| kernel " if several else "")
        + "| arch | registers | static smem | stack | spill st/ld | occupancy |",
        ("|---" if several else "") + "|---|---|---|---|---|---|",
    ]
    shown = set(names[:INSTANCE_ROWS])
    for k in kernels:
        if k.name not in shown:
            continue
        occ = "n/a (no literal block size in the launch comment)"
        if k.occupancy:
            occ = k.occupancy.describe()
        elif k.block_size:
            occ = f"n/a: a block of {k.block_size} threads cannot launch on {k.arch} (see the launch comment)"
        rows.append(
            (f"| `{k.name}` " if several else "")
            + f"| {k.arch} | {k.registers} | {format_bytes(k.shared_bytes)} | {format_bytes(k.stack_bytes)} "
            f"| {k.spill_store_bytes} B / {k.spill_load_bytes} B | {occ} |"
        )
    title = name if several or not kernels else kernels[0].name
    text = f"**`{title}`** — compiled with {'nvcc' if compiler == 'nvcc' else 'NVRTC'} (theoretical occupancy from the arch's limits)\n\n"
    if several:
        text += _instances_line(kernels, names, sources) + "\n\n"
    text += "\n".join(rows)
    if len(names) > INSTANCE_ROWS:
        text += f"\n\n… and {len(names) - INSTANCE_ROWS} more instances."
    unread = [k for k in kernels if k.name.endswith("<?>") or "<?> #" in k.name]
    if unread:
        text += "\n\nNot demangled: " + ", ".join(f"`{k.mangled}`" for k in unread[:5])
    return text


def _instances_line(kernels: list[KernelResources], names: list[str], sources: tuple[str, ...]) -> str:
    line = f"{len(names)} instances: registers {span([k.registers for k in kernels])}"
    occupancies = [k.occupancy.fraction for k in kernels if k.occupancy]
    if occupancies:
        line += f", occupancy {span(occupancies, lambda f: f'{f:.0%}')}"
    if sources:
        shown = ", ".join(os.path.basename(s) for s in sources[:5])
        line += f" (compiled by {shown}{f' and {len(sources) - 5} more' if len(sources) > 5 else ''})"
    return line


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: types.HoverParams) -> types.Hover | None:
        path = uri_to_path(params.text_document.uri)
        doc = ls.workspace.get_text_document(params.text_document.uri)
        line = doc.lines[params.position.line] if params.position.line < len(doc.lines) else ""
        name = word_at(line, params.position.character)
        if not name or not path:
            return None
        signatures = {k.name: k for k in find_kernels(doc.source)}
        if name not in signatures:
            return None
        check = await ls.analysis.latest(path)
        kernels = [k for k in check.kernels if k.source_function == name] if check else []
        # Instances of a template written here, compiled by the files that include it.
        elsewhere = [(f, k) for f, k in ls.analysis.instances_defined_in(path) if k.source_function == name]
        known = {(k.name, k.arch) for k in kernels}
        for _, k in elsewhere:
            if (k.name, k.arch) not in known:
                known.add((k.name, k.arch))
                kernels.append(k)
        sources = tuple(dict.fromkeys(f for f, _ in elsewhere))
        parts = []
        if kernels:
            compiler = (
                check.results[0].compiler if check and check.results else "nvcc" if elsewhere else "nvrtc"
            )
            parts.append(resources_markdown(name, kernels, compiler, sources))
        elif check and not check.checked:
            # Too large, binary, unreadable: it will not be compiled, so "not compiled yet" would
            # promise something; say why instead.
            why = check.diagnostics[0].message if check.diagnostics else "the file was not checked"
            parts.append(f"**`{name}`** — no resources: {why}")
        elif check and check.errors:
            parts.append(f"**`{name}`** — no resources: the file does not compile ({check.errors} error(s)).")
        elif signatures[name].templated:
            parts.append(
                f"**`{name}`** — a template: no instance compiled yet (the files that instantiate it "
                "show theirs here once they are checked)."
            )
        else:
            parts.append(f"**`{name}`** — not compiled yet.")
        for section in ls.hover_sections(path, name):
            parts.append(section)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts))
        )
