"""C and CUDA source text with its comments (and string literals) blanked: offsets and line
numbers stay those of the source, so what is found in the blanked text points into the file."""

from __future__ import annotations

import re

_COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def blank_comments(source: str) -> str:
    """The source with comments and string literals replaced by spaces, newlines kept, so offsets
    and line numbers still match."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return _COMMENT_OR_STRING.sub(blank, source)


def blank_comments_keep_strings(source: str) -> str:
    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        return re.sub(r"[^\n]", " ", s) if s.startswith("/") else s

    return _COMMENT_OR_STRING.sub(blank, source)
