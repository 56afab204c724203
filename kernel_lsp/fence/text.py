"""A candidate's text as the C preprocessor reads it, for the fence's checks: line splices undone,
comments removed, digraphs mapped. A check that reads the raw text can be walked around by
anything the preprocessor rewrites before it sees a directive or a token (`#inc\\<newline>lude`,
`#/**/include`, `%:include`, `<% ... %>` braces), so every text check reads this instead.

Two views of the same characters: `text` keeps string and character literals (include names,
`_Pragma` strings, asm templates), `code` blanks their contents (so a keyword in a string is not
a keyword). `line_at(offset)` maps either back to the candidate's own 1-based line.

The scanner follows GCC's lexer (nvcc preprocesses with the host compiler): a splice is a
backslash, optional blanks, then a newline; string and character literals end at a newline;
raw strings keep their splices; `1'000` is a number, not a character literal; a header name
after `#include` is read up to `>` with no comments in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..lexer import (
    BLOCK_COMMENT,
    HEADER_NAME,
    LINE_COMMENT,
    RAW_STRING,
    STRING,
    Lexed,
    Token,
    closed_literal,
    lex,
)

# Trigraphs: GCC ignores them without -trigraphs (and warns); another compiler would not, so a
# text that holds one reads differently to different tools and is refused outright.
TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_DIGRAPHS = {"<%": "{", "%>": "}", "<:": "[", ":>": "]"}


@dataclass
class CleanText:
    """`text` and `code` have the same length; `lines[i]` is the source line of character i."""

    text: str
    code: str
    lines: list[int] = field(repr=False)
    # (offset in `text` of the opening quote, the literal's characters between its quotes).
    strings: list[tuple[int, str]] = field(default_factory=list, repr=False)

    def line_at(self, offset: int) -> int:
        if not self.lines:
            return 1
        return self.lines[min(max(offset, 0), len(self.lines) - 1)]


def _logical_lines(lexed: Lexed) -> list[int]:
    """The source line of each character of the logical text (a splice's newline counts)."""
    lines: list[int] = []
    line, last = 1, 0
    text = lexed.logical
    for at in (*lexed.splice_at, len(text)):
        for ch in text[last:at]:
            lines.append(line)
            if ch == "\n":
                line += 1
        line += 1  # the splice's own newline
        last = at
    return lines


class _Writer:
    """The two views, written from the lexer's tokens and the code between them."""

    def __init__(self, lexed: Lexed) -> None:
        self.lexed = lexed
        self.logical = lexed.logical
        self.line_of = _logical_lines(lexed)
        self.text: list[str] = []
        self.code: list[str] = []
        self.lines: list[int] = []
        self.strings: list[tuple[int, str]] = []

    def emit(self, ch: str, line: int, code_ch: str | None = None) -> None:
        self.text.append(ch)
        self.code.append(ch if code_ch is None else code_ch)
        self.lines.append(line)

    def run(self) -> CleanText:
        at = 0
        for tok in self.lexed.tokens:
            self.code_between(at, tok.lstart)
            self.token(tok)
            at = tok.lend
        self.code_between(at, len(self.logical))
        return CleanText("".join(self.text), "".join(self.code), self.lines, self.strings)

    def code_between(self, start: int, end: int) -> None:
        """Code: `%:` is `#`, digraphs are their brackets (`<::` is `<` then `::`)."""
        text = self.logical
        i = start
        while i < end:
            ch, pair = text[i], text[i : i + 2]
            if pair == "%:":
                self.emit("#", self.line_of[i])
                i += 2
            elif pair in _DIGRAPHS and i + 1 < end and not _template_colons(text, i):
                self.emit(_DIGRAPHS[pair], self.line_of[i])
                i += 2
            else:
                self.emit(ch, self.line_of[i])
                i += 1

    def token(self, tok: Token) -> None:
        text, line = self.logical, self.line_of[tok.lstart]
        if tok.kind == LINE_COMMENT:
            return  # its newline, after it, stays
        if tok.kind == BLOCK_COMMENT:
            self.emit(" ", line)  # one space in its place (translation phase 3)
        elif tok.kind == HEADER_NAME:
            for i in range(tok.lstart, tok.lend):
                self.emit(text[i], self.line_of[i])
        elif tok.kind == RAW_STRING:
            self.raw_string(tok, line)
        else:
            self.quoted(tok)

    def quoted(self, tok: Token) -> None:
        text = self.logical
        quote = text[tok.lstart]
        closed = closed_literal(text[tok.lstart : tok.lend])
        body_end = tok.lend - 1 if closed else tok.lend
        start = len(self.text)
        self.emit(quote, self.line_of[tok.lstart])
        for i in range(tok.lstart + 1, body_end):
            self.emit(text[i], self.line_of[i], " ")
        if closed:
            self.emit(quote, self.line_of[body_end])
        if tok.kind == STRING:
            self.strings.append((start, text[tok.lstart + 1 : body_end]))

    def raw_string(self, tok: Token, line: int) -> None:
        """Written from the source as it is: a raw string keeps its splices, by the standard."""
        src = self.lexed.source
        start = len(self.text)
        self.emit('"', line)
        for ch in src[tok.start + 1 : tok.end]:
            self.emit(ch, line, " " if ch != "\n" else "\n")
            if ch == "\n":
                line += 1
        open_paren = src.find("(", tok.start + 1)
        closing = ")" + src[tok.start + 1 : open_paren] + '"'
        closed = src.endswith(closing, open_paren + 1, tok.end)
        body = src[open_paren + 1 : tok.end - len(closing)] if closed else src[tok.start + 1 : tok.end]
        self.strings.append((start, body))


def _template_colons(text: str, i: int) -> bool:
    """`<::` is `<` then `::` (C++11) unless a third `:` or a `>` follows."""
    return text[i : i + 3] == "<::" and text[i + 3 : i + 4] not in (":", ">")


def clean(source: str) -> CleanText:
    """The two views of `source` (see the module's doc). A carriage return ends a line for the
    compiler as a newline does (`int a;\r#include "x"` holds a directive), so both become one."""
    return _Writer(lex(source.replace("\r\n", "\n").replace("\r", "\n"))).run()


@dataclass(frozen=True)
class Directive:
    """One preprocessing directive: `name` ("include", "define", "" for a null directive),
    `rest` (the text after the name, comments gone), its offset in the views and its line."""

    name: str
    rest: str
    offset: int
    line: int
    hash_offset: int = 0  # where its `#` is
    rest_offset: int = 0  # where `rest` starts


_DIRECTIVE = re.compile(r"^[ \t\f\v]*(#)[ \t\f\v]*([A-Za-z_]\w*|\d+)?(.*)$", re.M)


def directives(ct: CleanText) -> list[Directive]:
    """Every logical line that starts with `#` (or `%:`, mapped), after splices and comments."""
    return [
        Directive(m.group(2) or "", m.group(3), m.start(), ct.line_at(m.start()), m.start(1), m.start(3))
        for m in _DIRECTIVE.finditer(ct.text)
    ]
