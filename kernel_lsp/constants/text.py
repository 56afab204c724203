"""C and CUDA source text with its comments (and string literals) blanked: offsets and line
numbers stay those of the source, so what is found in the blanked text points into the file."""

from __future__ import annotations

import re

_COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def _spaces(text: str) -> str:
    """`text` as spaces, its newlines kept (a check blanks a file's comments on every save)."""
    if "\n" not in text:
        return " " * len(text)
    return "\n".join(" " * len(line) for line in text.split("\n"))


def blank_comments(source: str) -> str:
    """The source with comments and string literals replaced by spaces, newlines kept, so offsets
    and line numbers still match."""
    return _COMMENT_OR_STRING.sub(lambda m: _spaces(m.group(0)), source)


def blank_comments_keep_strings(source: str) -> str:
    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        return _spaces(s) if s.startswith("/") else s

    return _COMMENT_OR_STRING.sub(blank, source)
