"""textDocument/hover: on a kernel's name its resources per arch, occupancy, and the GPU figures
when the kernel has a spec and a GPU checked it (kernel-lsp's own figures, first), then clangd's
hover (what the symbol is: signature, documentation). On a template, its instances — compiled by
this file or by the files that include it — with their range of registers and occupancy."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from ...api.model import format_bytes
from .code_lens import span

if TYPE_CHECKING:
    from ...api.model import KernelResources
    from ..snapshot import DocumentSnapshot

# The engine's modules (launch reading, specs, numpy's statistics, the profile's wording) are
# imported where they are used, so that registering hover does not slow the server's start.

# Rows shown in a hover's table; more instances are counted, not listed.
INSTANCE_ROWS = 20

log = logging.getLogger(__name__)


# `__launch_bounds__(256, 4)`, `__restrict__`: in Markdown `__x__` is bold "x".
_DOUBLE_UNDERSCORED = re.compile(r"__\w+__(?:\([^()`]*\))?")


def as_code_names(text: str) -> str:
    """Plain text for Markdown: the `__word__` names (and their argument lists) outside code spans
    become code spans, so that they read as written instead of as bold words."""
    pieces = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(pieces), 2):  # the even pieces are outside code spans
        pieces[i] = _DOUBLE_UNDERSCORED.sub(lambda m: f"`{m.group(0)}`", pieces[i])
    return "".join(pieces)


def word_at(line: str, character: int) -> str | None:
    for m in re.finditer(r"[A-Za-z_]\w*", line):
        if m.start() <= character <= m.end():
            return m.group(0)
    return None


def resources_markdown(
    name: str, kernels: list[KernelResources], compiler: str = "nvrtc", sources: tuple[str, ...] = ()
) -> str:
    """`sources`: the files that compiled instances of a template written elsewhere."""
    from ...api.sources import NO_BLOCK

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
        occ = "n/a (see the launches below)" if k.launches else f"n/a ({as_code_names(NO_BLOCK)})"
        if k.occupancy:
            occ = k.occupancy.describe()
        elif k.block_size:
            occ = f"n/a: a block of {k.block_size} threads cannot launch on {k.arch}"
        rows.append(
            (f"| `{k.qualified_name}` " if several else "")
            + f"| {k.arch} | {k.registers} | {format_bytes(k.shared_bytes)} | {format_bytes(k.stack_bytes)} "
            f"| {k.spill_store_bytes} B / {k.spill_load_bytes} B | {occ} |"
        )
    title = name if several or not kernels else kernels[0].qualified_name
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
    from ...api.sources import describe_launches

    firsts: dict[str, KernelResources] = {}
    for k in kernels:
        firsts.setdefault(k.name, k)
    lines = []
    for k in firsts.values():
        label = f"`{k.qualified_name}`: " if several else ""
        for entry, text in zip(k.launches, describe_launches(k.launches, k.arch), strict=True):
            if entry.occupancy is not None and entry.occupancy == k.occupancy:
                text = entry.source + (f" ({entry.note})" if entry.note else "")  # the table's figure
            lines.append(f"- {label}{as_code_names(text)}")
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
            uri = params.text_document.uri
            snapshot = ls.document_snapshot_now(uri)
            if snapshot is not None and needs_check(snapshot, params.position):
                snapshot = await ls.document_snapshot(uri)  # a kernel's resources: wait for its check
        except BaseException:
            asked.cancel()
            raise
        try:
            answer = await asked
        except Exception as e:  # clangd's error must not cost kernel-lsp's part
            log.info("clangd's hover failed: %s", e)
            answer = None
        return hover_answer(snapshot, params.position, answer)


def hover_answer(
    snapshot: DocumentSnapshot | None, position: types.Position, clangd_answer: object
) -> types.Hover | None:
    """kernel-lsp's part first (the figures this server exists for), a rule, then clangd's (what
    the symbol is: its signature and documentation)."""
    signature = clangd_markdown(clangd_answer)
    parts = kernel_parts(snapshot, position) if snapshot is not None else []
    text = "\n\n---\n\n".join(p for p in ("\n\n".join(parts), signature) if p)
    if not text:
        return None
    r = clangd_answer.get("range") if signature and isinstance(clangd_answer, dict) else None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
        range=types.Range(start=types.Position(**r["start"]), end=types.Position(**r["end"])) if r else None,
    )


def _word(snapshot: DocumentSnapshot, position: types.Position) -> str | None:
    lines = snapshot.lines
    return word_at(lines[position.line] if position.line < len(lines) else "", position.character)


def needs_check(snapshot: DocumentSnapshot, position: types.Position) -> bool:
    """Whether the hover is on a kernel of the file: only then does it wait for the file's check."""
    from ...api.sources import find_kernels

    name = _word(snapshot, position)
    return bool(name) and any(k.name == name for k in find_kernels(snapshot.text))


def kernel_parts(snapshot: DocumentSnapshot, position: types.Position) -> list[str]:
    """kernel-lsp's part: a kernel's resources and GPU figures; nothing for other words."""
    from ...api.sources import find_kernels

    name = _word(snapshot, position)
    if not name:
        return []
    signatures = {k.name: k for k in find_kernels(snapshot.text)}
    if name not in signatures:
        if name in snapshot.gpu.entries:  # a host entry: the figures are the whole call's
            return [
                f"**`{name}`** — host entry, called with the spec's buffers",
                *gpu_sections(snapshot, name),
            ]
        return []
    check = snapshot.check
    kernels = [k for k in check.kernels if k.source_function == name] if check else []
    # Instances of a template written here, compiled by the files that include it.
    elsewhere = [(f, k) for f, k in snapshot.instances_elsewhere if k.source_function == name]
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
        parts.append(f"**`{name}`** — no resources: {as_code_names(why)}")
    elif check and check.errors:
        parts.append(f"**`{name}`** — no resources: the file does not compile ({check.errors} error(s)).")
    elif signatures[name].templated:
        parts.append(
            f"**`{name}`** — a template: no instance compiled yet (the files that instantiate it "
            "show theirs here once they are checked)."
        )
    else:
        parts.append(f"**`{name}`** — not compiled yet.")
    return parts + gpu_sections(snapshot, name)


def gpu_sections(snapshot: DocumentSnapshot, kernel: str) -> list[str]:
    """The GPU's verdict and figures for `kernel` (a kernel or a host entry), or why there are none."""
    from ...api.model import format_seconds
    from ...api.sources import spec_path_for
    from ..profile_view import profile_markdown

    gpu = snapshot.gpu
    if gpu.absent_reason is not None:
        return [f"_No GPU figures ({gpu.absent_reason}); compile features keep working._"]
    k = gpu.check_for(kernel)
    device = gpu.device
    if k is None:
        if not snapshot.spec_on_disk:
            return [
                f"_No spec: add `{os.path.basename(spec_path_for(snapshot.path))}` (code action “Write a spec skeleton”) to verify and time this kernel on {device}._"
            ]
        return [f"_GPU check pending on {device}._"]
    if not k.ok:
        # Too fast to be true is its own verdict: the figure is not shown as a result.
        status = "suspicious ⚠" if any(p.kind == "suspicious" for p in k.problems) else k.status
        return [f"**GPU check ({device}): {status}** — {as_code_names(k.message)}"]
    rows = [
        f"**GPU ({_where(k, device)})** — verified on {len(k.cases)} case(s); "
        "latency is the median of n cold-L2 samples, spread p10–p90",
        "",
        "| case | median | p10–p90 | n | bandwidth | FLOP/s | roofline |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in k.timings:
        m = t.measurement
        bw = f"{t.bandwidth_Bps / 1e9:.0f} GB/s" if t.bandwidth_Bps else "–"
        fl = f"{t.flops_per_s / 1e12:.2f} TFLOP/s" if t.flops_per_s else "–"
        roof = t.roofline_text or "–"
        if t.over_bound or t.suspicious:
            roof += f": {t.over_bound or t.suspicious}"
        if t.bound_note:
            roof += f" ({t.bound_note})"
        cache = "" if m.cold_l2 else " (warm L2)"
        rows.append(
            f"| {t.case} | {format_seconds(m.median_s)}{cache} | {m.spread} | {m.n} | {bw} | {fl} | {roof} |"
        )
    rows.append("")
    if k.occupancy:
        rows += [
            f"Occupancy of `{o.kernel}` ({o.case}, ncu): achieved **{o.achieved:.0%}** of the "
            f"SM's warp slots vs theoretical {o.theoretical:.0%}"
            for o in k.occupancy
        ]
    elif k.occupancy_note:
        rows.append(f"_Achieved occupancy: {k.occupancy_note}. The occupancy above is theoretical._")
    else:
        rows.append("_Occupancy above is theoretical; achieved occupancy (ncu) is being read or is off._")
    if k.profile is not None and k.profile.kernels:
        rows += ["", profile_markdown(k.profile)]
    return ["\n".join(rows)]


def _where(k, device: str) -> str:
    """The device that measured `k`, and its host when that is another machine (a Ray cluster's)."""
    from ...workspace import gpu_name

    return gpu_name(k.device, getattr(k, "host", ""), device)
