"""A kernel's profile (limiter, speed of light, stalls, hottest lines) in the editor: the hover
table and the code lenses on the hottest lines ("31% of stall samples: long scoreboard")."""

from __future__ import annotations

import os

from lsprotocol import types

from ..api.gpu import HotLine, ProfileReport, memory_text, sol_text, stall_text
from ..api.model import format_seconds


def profile_markdown(report: ProfileReport, hot: int = 5) -> str:
    if not report.kernels:
        return f"_Profile (ncu): {report.note or 'not read'}._"
    rows = [
        f"**What limits it** (Nsight Compute, {report.case or 'timed case'}, profiling run {report.wall_s:.1f} s)",
        "",
        "| kernel | limiter | speed of light | achieved occupancy | top stalls | memory | time (one launch) |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in report.kernels:
        occ = f"{k.achieved_occupancy:.0%}" if k.achieved_occupancy is not None else "–"
        if k.achieved_occupancy is not None and k.theoretical_occupancy:
            occ += f" of {k.theoretical_occupancy:.0%}"
        time = format_seconds(k.duration_s) if k.duration_s is not None else "–"
        rows.append(
            f"| `{k.kernel}` | **{k.limiter}** ({k.evidence}) | {sol_text(k) or '–'} | {occ} "
            f"| {stall_text(k) or '–'} | {memory_text(k) or '–'} | {time} |"
        )
    lines = report.hot_lines[: hot * max(1, len(report.kernels))]
    if lines:
        rows += ["", "| hottest lines | stall samples | top stall | source |", "|---|---|---|---|"]
        many = len(report.kernels) > 1
        for h in lines:
            where = f"{os.path.basename(h.path)}:{h.line}" + (f" (`{h.kernel}`)" if many else "")
            code = h.text.replace("|", "\\|")
            rows.append(f"| {where} | {h.share:.0%} | {h.stall_label} | `{code}` |")
    if report.missing:
        rows += ["", f"_Not reported by this ncu: {', '.join(report.missing)}._"]
    if report.note:
        rows += ["", f"_{report.note}._"]
    return "\n".join(rows)


def hot_line_lenses(lines: list[HotLine], path: str) -> list[types.CodeLens]:
    """One lens per hot line of this file (the hottest kernel's words when two kernels share it)."""
    lenses, seen = [], set()
    for h in sorted(lines, key=lambda h: -h.share):
        if h.line in seen or os.path.abspath(h.path) != os.path.abspath(path):
            continue
        seen.add(h.line)
        pos = types.Position(line=h.line - 1, character=0)
        lenses.append(
            types.CodeLens(
                range=types.Range(start=pos, end=pos),
                command=types.Command(title=f"{h.summary} ({h.kernel})", command=""),
            )
        )
    return lenses
