"""The accepted candidate as small line edits of the original (for an editor preview that shows
only what changed, instead of one whole-file replacement)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class LineEdit:
    start_line: int  # 0-based, inclusive
    end_line: int  # 0-based, exclusive: lines [start_line, end_line) are replaced
    text: str  # the new lines, each with its line ending


def line_edits(old: str, new: str) -> list[LineEdit]:
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            edits.append(LineEdit(i1, i2, "".join(b[j1:j2])))
    return edits


def apply_line_edits(old: str, edits: list[LineEdit]) -> str:
    lines = old.splitlines(keepends=True)
    for e in sorted(edits, key=lambda e: -e.start_line):
        lines[e.start_line : e.end_line] = [e.text] if e.text else []
    return "".join(lines)
