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

# Trigraphs: GCC ignores them without -trigraphs (and warns); another compiler would not, so a
# text that holds one reads differently to different tools and is refused outright.
TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n")
_DIGRAPHS = {"<%": "{", "%>": "}", "<:": "[", ":>": "]"}
_RAW_PREFIXES = frozenset(["u8R", "uR", "UR", "LR", "R"])
_INCLUDE_HEAD = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import|embed)[ \t]*$")
_IDENT_CHAR = re.compile(r"\w")


@dataclass
class CleanText:
    """`text` and `code` have the same length; `lines[i]` is the source line of character i."""

    text: str
    code: str
    lines: list[int] = field(repr=False)
    # (offset in `text` of the opening quote, the literal's characters between its quotes).
    strings: list[tuple[int, str]] = field(default_factory=list, repr=False)
    raw_strings: list[int] = field(default_factory=list, repr=False)  # offsets of R"..." literals

    def line_at(self, offset: int) -> int:
        if not self.lines:
            return 1
        return self.lines[min(max(offset, 0), len(self.lines) - 1)]


class _Scanner:
    """One pass over the source, writing the two views character by character."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0
        self.line = 1
        self.text: list[str] = []
        self.code: list[str] = []
        self.lines: list[int] = []
        self.strings: list[tuple[int, str]] = []
        self.raw_strings: list[int] = []
        self.line_start = 0  # where the output's current line starts

    # --- reading the source ---------------------------------------------------------------

    def _skip_splices(self) -> None:
        while True:
            m = _SPLICE.match(self.src, self.pos)
            if not m:
                return
            self.line += 1
            self.pos = m.end()

    def peek(self, ahead: int = 0) -> str:
        """The character `ahead` logical characters on (splices skipped), '' at the end."""
        saved = (self.pos, self.line)
        self._skip_splices()
        for _ in range(ahead):
            if self.pos >= len(self.src):
                break
            self._advance_raw()
            self._skip_splices()
        ch = self.src[self.pos] if self.pos < len(self.src) else ""
        self.pos, self.line = saved
        return ch

    def _advance_raw(self) -> str:
        ch = self.src[self.pos]
        self.pos += 1
        if ch == "\n":
            self.line += 1
        return ch

    def take(self) -> tuple[str, int]:
        """The next logical character and its line."""
        self._skip_splices()
        line = self.line
        return self._advance_raw(), line

    def at_end(self) -> bool:
        self._skip_splices()
        return self.pos >= len(self.src)

    # --- writing the views ----------------------------------------------------------------

    def emit(self, ch: str, line: int, code_ch: str | None = None) -> None:
        if ch == "\n":
            self.line_start = len(self.text) + 1
        self.text.append(ch)
        self.code.append(ch if code_ch is None else code_ch)
        self.lines.append(line)

    def current_line_text(self, limit: int = 4096) -> str:
        """The output's current line so far; '' when longer than `limit` (an include's head
        is short; a longer one that is an include still fails the plain-include rule)."""
        if len(self.text) - self.line_start > limit:
            return ""
        return "".join(self.text[self.line_start :])

    def word_before(self) -> str:
        """The identifier the output ends with (a string literal's prefix, `u8R`)."""
        i = len(self.text)
        while i > 0 and _IDENT_CHAR.match(self.text[i - 1]):
            i -= 1
        return "".join(self.text[i:])

    # --- the states -----------------------------------------------------------------------

    def run(self) -> CleanText:
        while not self.at_end():
            ch, line = self.take()
            nxt = self.peek()
            if ch == "/" and nxt == "/":
                self._line_comment()
            elif ch == "/" and nxt == "*":
                self.take()
                self._block_comment(line)
            elif ch in "\"'":
                if ch == '"' and self.word_before() in _RAW_PREFIXES:
                    self._raw_string(line)
                elif ch == "'" and self._in_number():
                    self.emit(ch, line)
                else:
                    self._quoted(ch, line)
            elif ch == "<" and _INCLUDE_HEAD.match(self.current_line_text()):
                self._header_name(line)
            elif ch == "%" and nxt == ":":
                self.take()
                self.emit("#", line)
            elif ch + nxt in _DIGRAPHS and not self._template_colons(ch, nxt):
                self.take()
                self.emit(_DIGRAPHS[ch + nxt], line)
            else:
                self.emit(ch, line)
        return CleanText("".join(self.text), "".join(self.code), self.lines, self.strings, self.raw_strings)

    def _template_colons(self, ch: str, nxt: str) -> bool:
        """`<::` is `<` then `::` (C++11) unless a third `:` or a `>` follows."""
        return ch == "<" and nxt == ":" and self.peek(1) == ":" and self.peek(2) not in (":", ">")

    def _in_number(self) -> bool:
        """Whether a `'` continues a pp-number (a digit separator, `1'000`)."""
        i = len(self.text) - 1
        while i >= 0 and (_IDENT_CHAR.match(self.text[i]) or self.text[i] == "."):
            i -= 1
        word = "".join(self.text[i + 1 :])
        nxt = self.peek()
        return (
            bool(word)
            and (word[0].isdigit() or (word[0] == "." and word[1:2].isdigit()))
            and bool(nxt and _IDENT_CHAR.match(nxt))
        )

    def _line_comment(self) -> None:
        # Ends at the newline (which stays); a splice continues it, as in the compiler.
        while not self.at_end() and self.peek() != "\n":
            self.take()

    def _block_comment(self, line: int) -> None:
        # One space in its place (translation phase 3): a directive goes on past its newlines.
        while not self.at_end():
            ch, _ = self.take()
            if ch == "*" and self.peek() == "/":
                self.take()
                break
        self.emit(" ", line)

    def _quoted(self, quote: str, line: int) -> None:
        start = len(self.text)
        self.emit(quote, line)
        body: list[str] = []
        while not self.at_end():
            if self.peek() == "\n":
                break  # unterminated: the compiler ends it at the line's end too
            ch, at = self.take()
            if ch == "\\" and not self.at_end() and self.peek() != "\n":
                escaped, at2 = self.take()
                body += [ch, escaped]
                self.emit(ch, at, " ")
                self.emit(escaped, at2, " ")
                continue
            if ch == quote:
                self.emit(ch, at)
                break
            body.append(ch)
            self.emit(ch, at, " ")
        if quote == '"':
            self.strings.append((start, "".join(body)))

    def _raw_string(self, line: int) -> None:
        """R"delim( ... )delim": read from the source as it is (splices stay, by the standard)."""
        start = len(self.text)
        self.raw_strings.append(start)
        self.emit('"', line)
        delim_end = self.src.find("(", self.pos)
        if delim_end < 0 or delim_end - self.pos > 16:
            return  # not a raw string after all; the compiler refuses it
        closing = ")" + self.src[self.pos : delim_end] + '"'
        end = self.src.find(closing, delim_end + 1)
        stop = len(self.src) if end < 0 else end + len(closing)
        body = self.src[self.pos : stop]
        for ch in body:  # its line count follows the source's, splices included
            self.emit(ch, self.line, " " if ch != "\n" else "\n")
            if ch == "\n":
                self.line += 1
        self.pos = stop
        self.strings.append((start, self.src[delim_end + 1 : end] if end >= 0 else body))

    def _header_name(self, line: int) -> None:
        """`#include <...>`: the compiler reads up to `>` (no comments, no strings in it)."""
        self.emit("<", line)
        while not self.at_end() and self.peek() != "\n":
            ch, at = self.take()
            self.emit(ch, at)
            if ch == ">":
                break


def clean(source: str) -> CleanText:
    """The two views of `source` (see the module's doc). A carriage return ends a line for the
    compiler as a newline does (`int a;\r#include "x"` holds a directive), so both become one."""
    return _Scanner(source.replace("\r\n", "\n").replace("\r", "\n")).run()


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
