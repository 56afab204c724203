"""textDocument/codeLens: one headline above each kernel — the GPU figures when it was checked on
a GPU, else its compile resources — and, once a kernel is profiled, one lens on each of its
hottest lines ("31% of stall samples: long scoreboard")."""

from __future__ import annotations

from lsprotocol import types

from ...host_entry import find_host_function
from ..profile_view import hot_line_lenses
from ..uris import uri_to_path


def compile_headline(k) -> str:
    parts = [f"{k.registers} regs"]
    if k.spills:
        parts.append(f"spills {k.spill_store_bytes}/{k.spill_load_bytes} B")
    if k.shared_bytes:
        parts.append(f"{k.shared_bytes} B smem")
    if k.occupancy:
        parts.append(f"{k.occupancy.fraction:.0%} occupancy @{k.occupancy.block_size}")
    return " · ".join(parts) + f" · {k.arch}"


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls, params: types.CodeLensParams) -> list[types.CodeLens]:
        path = uri_to_path(params.text_document.uri)
        if not path:
            return []
        check = await ls.analysis.latest(path)
        if not check:
            return []
        lenses, seen = [], set()
        # Template instances and overloads on one line: a lens each, named.
        per_line: dict[int, set[str]] = {}
        for k in check.kernels:
            per_line.setdefault(k.line, set()).add(k.name)
        for k in check.kernels:
            if k.name in seen or not k.line:
                continue
            seen.add(k.name)
            title = ls.gpu_headline(path, k.name) or compile_headline(k)
            if len(per_line[k.line]) > 1:
                title = f"{k.name}: {title}"
            pos = types.Position(line=k.line - 1, character=0)
            lenses.append(
                types.CodeLens(
                    range=types.Range(start=pos, end=pos), command=types.Command(title=title, command="")
                )
            )
        lenses += _entry_lenses(ls, path, params.text_document.uri)
        return lenses + hot_line_lenses(ls.hot_lines(path), path)


def _entry_lenses(ls, path: str, uri: str) -> list[types.CodeLens]:
    """The headline of each checked host entry, above its function."""
    entries = ls.gpu_entries(path)
    if not entries:
        return []
    source = ls.workspace.get_text_document(uri).source
    lenses = []
    for name in entries:
        function = find_host_function(source, name)
        title = ls.gpu_headline(path, name)
        if function is None or not title:
            continue
        pos = types.Position(line=function.line - 1, character=0)
        lenses.append(
            types.CodeLens(
                range=types.Range(start=pos, end=pos), command=types.Command(title=title, command="")
            )
        )
    return lenses
