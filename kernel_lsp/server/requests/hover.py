"""textDocument/hover: clangd's hover (what the symbol is: signature, documentation), and on a
kernel's name its resources per arch, occupancy, and the GPU figures when the kernel has a spec
and a GPU checked it. On a template, its instances — compiled by this file or by the files that
include it — with their range of registers and occupancy."""

from __future__ import annotations

import asyncio
import logging
import os
import re

from lsprotocol import types

from ...host_launch.occupancy import NO_BLOCK, describe_launches
from ...model import KernelResources, format_bytes
from ...source import find_kernels
from ..uris import uri_to_path
from .code_lens import span

# Rows shown in a hover's table; more instances are counted, not listed.
INSTANCE_ROWS = 20

log = logging.getLogger(__name__)


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
    text = f"**`{title}`** — compiled with {'nvcc' if compiler == 'nvcc' else 'NVRTC'} (theoretical occupancy from the arch's limits)\n\n"
    if several:
        text += _instances_line(kernels, names, sources) + "\n\n"
    text += "\n".join(rows)
    if len(names) > INSTANCE_ROWS:
        text += f"\n\n… and {len(names) - INSTANCE_ROWS} more instances."
    unread = [k for k in kernels if k.name.endswith("<?>") or "<?> #" in k.name]
    if unread:
        text += "\n\nNot demangled: " + ", ".join(f"`{k.mangled}`" for k in unread[:5])
    return text + launches_markdown(kernels, several)


def _instances_line(kernels: list[KernelResources], names: list[str], sources: tuple[str, ...]) -> str:
    # Overloads are named by their parameters (`relu(float*, int)`), instances by their arguments.
    what = "overloads" if all(n.endswith(")") for n in names) else "instances"
    line = f"{len(names)} {what}: registers {span([k.registers for k in kernels])}"
    occupancies = [k.occupancy.fraction for k in kernels if k.occupancy]
    if occupancies:
        line += f", occupancy {span(occupancies, lambda f: f'{f:.0%}')}"
    if sources:
        shown = ", ".join(os.path.basename(s) for s in sources[:5])
        line += f" (compiled by {shown}{f' and {len(sources) - 5} more' if len(sources) > 5 else ''})"
    return line


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


def clangd_markdown(answer) -> str | None:
    """clangd's hover (signature, documentation) as Markdown."""
    contents = answer.get("contents") if isinstance(answer, dict) else None
    if isinstance(contents, dict) and contents.get("value"):
        if contents.get("kind") == "markdown":
            return contents["value"]
        return f"```text\n{contents['value']}\n```"
    return None


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: types.HoverParams) -> types.Hover | None:
        # clangd's part (what the symbol is) is asked at once and awaited last: both run together.
        from ..clangd.features import ask

        asked = asyncio.ensure_future(ask(ls, types.TEXT_DOCUMENT_HOVER, params))
        try:
            parts = await kernel_parts(ls, params)
        except BaseException:
            asked.cancel()
            raise
        try:
            answer = await asked
        except Exception as e:  # clangd's error must not cost kernel-lsp's part
            log.info("clangd's hover failed: %s", e)
            answer = None
        signature = clangd_markdown(answer)
        # clangd's part first (what the symbol is), a rule, then kernel-lsp's as it always read.
        text = "\n\n---\n\n".join(p for p in (signature, "\n\n".join(parts)) if p)
        if not text:
            return None
        r = answer.get("range") if signature and isinstance(answer, dict) else None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
            range=types.Range(start=types.Position(**r["start"]), end=types.Position(**r["end"]))
            if r
            else None,
        )


async def kernel_parts(ls, params: types.HoverParams) -> list[str]:
    """kernel-lsp's part: a kernel's resources and GPU figures; nothing for other words."""
    path = uri_to_path(params.text_document.uri)
    doc = ls.workspace.get_text_document(params.text_document.uri)
    line = doc.lines[params.position.line] if params.position.line < len(doc.lines) else ""
    name = word_at(line, params.position.character)
    if not name or not path:
        return []
    signatures = {k.name: k for k in find_kernels(doc.source)}
    if name not in signatures:
        if name in ls.gpu_entries(path):  # a host entry: the figures are the whole call's
            return [
                f"**`{name}`** — host entry, called with the spec's buffers",
                *ls.hover_sections(path, name),
            ]
        return []
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
        compiler = check.results[0].compiler if check and check.results else "nvcc" if elsewhere else "nvrtc"
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
    return parts
