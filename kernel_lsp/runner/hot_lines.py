"""ncu's per-line counters mapped back to the lines of the user's files: the hottest lines of each
kernel by warp stall samples, with the stall that dominates each.

ncu names a file by the path NVRTC was given (the .cu's absolute path) or, for a header, the path
NVRTC resolved. A path with the main file's name is the main file even where the folder differs
(a report recorded on another machine, a moved checkout, a worker's copy).
"""

from __future__ import annotations

import os

from kernel_lsp.gpu_reports import HotLine
from kernel_lsp.runner.limiter import NOT_A_STALL, source_stall_reason
from kernel_lsp.runner.ncu_pages import L2_SECTORS_EXCESSIVE, SHARED_WAVEFRONTS_EXCESSIVE, SourcePage

HOT_LINES_PER_KERNEL = 5
MIN_SHARE = 0.02  # lines with fewer samples than this are not "hot"


def local_path(ncu_path: str, main_path: str) -> str:
    main = os.path.abspath(main_path)
    if not ncu_path or os.path.basename(ncu_path) == os.path.basename(main):
        return main
    return ncu_path


def hot_lines(
    page: SourcePage,
    function_to_kernel: dict[str, str],
    main_path: str,
    main_text: str | None = None,
    per_kernel: int = HOT_LINES_PER_KERNEL,
    min_share: float = MIN_SHARE,
) -> list[HotLine]:
    """The hottest lines of each function on the page, hottest first within a kernel. `main_text`
    is the source that was compiled (the editor's buffer): ncu reads the file from disk, which
    may be older, so a main-file line's text comes from `main_text` where given."""
    main_lines = main_text.splitlines() if main_text is not None else None
    out: list[HotLine] = []
    for function in page.functions:
        rows = [r for r in page.lines if r.function == function]
        total = sum(r.samples for r in rows)
        if total <= 0:
            continue
        kernel = function_to_kernel.get(function, function)
        for r in sorted(rows, key=lambda r: -r.samples)[:per_kernel]:
            share = r.samples / total
            if share < min_share:
                break
            stalls = {c: n for c, n in r.stalls.items() if source_stall_reason(c) not in NOT_A_STALL}
            column = max(stalls, key=lambda c: stalls[c]) if stalls and max(stalls.values()) > 0 else ""
            path = local_path(r.path, main_path)
            text = r.text
            if (
                main_lines is not None
                and path == os.path.abspath(main_path)
                and 0 < r.line <= len(main_lines)
            ):
                text = main_lines[r.line - 1]
            out.append(
                HotLine(
                    kernel=kernel,
                    path=path,
                    line=r.line,
                    text=text.strip(),
                    share=share,
                    samples=r.samples,
                    top_stall=source_stall_reason(column) if column else "",
                    top_stall_share=stalls[column] / r.samples if column and r.samples else 0.0,
                    instructions=r.instructions,
                    excess_l2_sectors=int(r.counters.get(L2_SECTORS_EXCESSIVE) or 0),
                    excess_shared_wavefronts=int(r.counters.get(SHARED_WAVEFRONTS_EXCESSIVE) or 0),
                )
            )
    return out
