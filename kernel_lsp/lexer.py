"""C, C++ and CUDA text as the compiler's lexer reads it: the one reader of where comments, string
and character literals, header names and line splices are, and, over comment-free text, of which
bracket closes which and where a list's top-level separators are. Every reader of source text (the
engine's parsers, the optimizer, the fence) goes through it, so no two of them disagree on where
a comment, a declaration or an argument ends.

It follows GCC's lexer (nvcc preprocesses with the host compiler, and `tests/integration/
test_lexer_compiler.py` holds it to g++ and nvcc on the repository's sources):
- a splice (a backslash, optional blanks, a newline) is undone first: `/\\<newline>/` starts a
  comment, a `//` comment ending in a splice goes on over the next line;
- string and character literals end at their quote, or at the end of the line when unterminated;
  a raw string `R"d( ... )d"` is read from the text as written (its splices stay), and `R` right
  after a literal is that literal's suffix (`'a'R"(` holds no raw string);
- a pp-number takes its digit separators (`1'000`, `0x1'ff'ff`, `.5'a`): their `'` starts no
  character literal;
- after `#include` (`#include_next`, `#import`, `#embed`), `<...>` is a header name: no comment in it.

Two views keep the text's offsets and line numbers (a blanked character becomes a space, a newline
stays): `blank_comments` (comments and literals blanked) and `blank_comments_keep_strings`. The
fence builds the preprocessor's own view (splices undone, digraphs mapped) from the same tokens
(`fence/text.py`).

Brackets and lists are read on a blanked view: `matching` and `matching_back` find a bracket's
partner, `top_level_spans` and `split_top` cut a list at its top-level separators, outside (), [],
{} and a template's angle brackets (`is_template_open` says which `<` opens one).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

LINE_COMMENT = "line-comment"
BLOCK_COMMENT = "block-comment"
STRING = "string"  # "..." with any prefix before it (u8, u, U, L) left as code
CHAR = "char"
RAW_STRING = "raw-string"  # from its opening quote; the prefix (R, u8R, ...) stays code
HEADER_NAME = "header-name"  # <...> after #include
COMMENTS = (LINE_COMMENT, BLOCK_COMMENT)
LITERALS = (STRING, CHAR, RAW_STRING)

_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n")
# What starts a token the lexer reads: a comment, a literal, a header name's `<`, and a number
# with a digit separator (`0x1'ff'ff`, `.5'a`: a pp-number, whose `'` starts no literal).
_PP_NUMBER_TAIL = r"(?:[eEpP][+-]|'\w|[\w.])*"
_START = re.compile(rf"/[/*]|[\"'<]|(?P<number>(?<!\w)\.?\d{_PP_NUMBER_TAIL}'\w{_PP_NUMBER_TAIL})")
# A backslash takes the character after it (a lone one, before the end of a line, is the
# literal's last character); a newline ends an unterminated literal.
_QUOTED = {
    '"': re.compile(r'"(?:\\.?|[^"\\\n])*"?'),
    "'": re.compile(r"'(?:\\.?|[^'\\\n])*'?"),
}
_RAW_PREFIXES = frozenset(["R", "u8R", "uR", "UR", "LR"])
_RAW_DELIMITER_MAX = 16  # the standard's limit on a raw string's delimiter
_INCLUDE_HEAD = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import|embed)[ \t]*$")
_INCLUDE_HEAD_MAX = 4096  # an include's head is short; a longer line is read as code


@dataclass(frozen=True)
class Token:
    """A comment, a literal or a header name. `start`/`end`: offsets in the text as written;
    `lstart`/`lend`: in the text with its splices undone (`Lexed.logical`)."""

    kind: str
    start: int
    end: int
    lstart: int
    lend: int


def closed_literal(text: str) -> bool:
    """Whether a quoted literal's text (as the lexer found it) ends with its closing quote, not
    at the end of its line or with an escaped quote."""
    if len(text) < 2 or text[-1] != text[0]:
        return False
    backslashes = len(text) - 1 - len(text[:-1].rstrip("\\"))
    return backslashes % 2 == 0


@dataclass(frozen=True)
class Lexed:
    source: str
    logical: str  # the source with its splices undone
    tokens: tuple[Token, ...]
    splice_at: tuple[int, ...]  # the logical offset at which each splice was removed
    removed: tuple[int, ...]  # the source characters removed up to and including each splice

    def source_offset(self, logical: int) -> int:
        """The offset in the source of the character at `logical` in the logical text."""
        k = bisect.bisect_right(self.splice_at, logical)
        return logical + (self.removed[k - 1] if k else 0)

    def logical_offset(self, source: int) -> int:
        """The logical offset of the source's character at `source` (the next one after a
        splice, when `source` lies in one)."""
        lo, hi = 0, len(self.splice_at)
        while lo < hi:  # the splices wholly before `source`
            mid = (lo + hi) // 2
            if self.splice_at[mid] + self.removed[mid] <= source:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.splice_at) and self.splice_at[lo] + (self.removed[lo - 1] if lo else 0) <= source:
            return self.splice_at[lo]  # inside the splice itself
        return source - (self.removed[lo - 1] if lo else 0)


def _undo_splices(source: str) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    if "\\" not in source:
        return source, (), ()
    parts: list[str] = []
    splice_at: list[int] = []
    removed: list[int] = []
    total, last, length = 0, 0, 0
    for m in _SPLICE.finditer(source):
        parts.append(source[last : m.start()])
        length += m.start() - last
        total += m.end() - m.start()
        splice_at.append(length)
        removed.append(total)
        last = m.end()
    parts.append(source[last:])
    return "".join(parts), tuple(splice_at), tuple(removed)


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _word_before(text: str, at: int) -> str:
    i = at
    while i > 0 and _is_word_char(text[i - 1]):
        i -= 1
    return text[i:at]


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.logical, self.splice_at, self.removed = _undo_splices(source)
        self.tokens: list[Token] = []
        self.view = Lexed(source, self.logical, (), self.splice_at, self.removed)  # offsets both ways

    def add(self, kind: str, lstart: int, lend: int) -> int:
        start = self.view.source_offset(lstart)
        end = self.view.source_offset(lend - 1) + 1
        self.tokens.append(Token(kind, start, end, lstart, lend))
        return lend

    def run(self) -> Lexed:
        text, pos = self.logical, 0
        while m := _START.search(text, pos):
            at = m.start()
            ch = text[at]
            if m.group("number"):
                pos = m.end()
            elif ch == "/":
                if text[at + 1] == "/":
                    end = text.find("\n", at)
                    pos = self.add(LINE_COMMENT, at, len(text) if end < 0 else end)
                else:
                    end = text.find("*/", at + 2)
                    pos = self.add(BLOCK_COMMENT, at, len(text) if end < 0 else end + 2)
            elif ch == '"' and self.raw_prefix_before(at):
                pos = self.raw_string(at)
            elif ch in "\"'":
                found = _QUOTED[ch].match(text, at)
                assert found is not None  # the pattern matches the quote alone at least
                pos = self.add(STRING if ch == '"' else CHAR, at, found.end())
            elif self.header_name_at(at):
                close = text.find(">", at + 1)
                newline = text.find("\n", at + 1)
                if close < 0 or 0 <= newline < close:
                    end = len(text) if newline < 0 else newline
                else:
                    end = close + 1
                pos = self.add(HEADER_NAME, at, end)
            else:
                pos = at + 1
        return Lexed(self.source, self.logical, tuple(self.tokens), self.splice_at, self.removed)

    def raw_prefix_before(self, at: int) -> bool:
        """Whether the `"` at `at` follows a raw string's prefix (`R`, `u8R`, ...) that is no
        literal's suffix (`'a'R` is a character literal with a user-defined suffix)."""
        word = _word_before(self.logical, at)
        if word not in _RAW_PREFIXES:
            return False
        last = self.tokens[-1] if self.tokens else None
        return not (last and last.kind in LITERALS and last.lend == at - len(word))

    def raw_string(self, at: int) -> int:
        """`R"delim( ... )delim"`, read in the source as written; a quote without a delimiter
        and `(` is no raw string (the compiler refuses it) and stays code."""
        src = self.source
        quote = self.view.source_offset(at)
        open_paren = src.find("(", quote + 1)
        if open_paren < 0 or open_paren - (quote + 1) > _RAW_DELIMITER_MAX:
            return at + 1
        closing = ")" + src[quote + 1 : open_paren] + '"'
        close = src.find(closing, open_paren + 1)
        end = len(src) if close < 0 else close + len(closing)
        lend = self.view.logical_offset(end)
        self.tokens.append(Token(RAW_STRING, quote, end, at, lend))
        return lend

    def header_name_at(self, at: int) -> bool:
        """Whether the `<` at `at` follows `#include` on its line, as the preprocessor reads the
        line: comments gone (a block comment over several lines joins them), `%:` for `#`."""
        text = self.logical
        line_start = text.rfind("\n", 0, at) + 1
        k = len(self.tokens) - 1
        while k >= 0 and self.tokens[k].lend > line_start:
            tok = self.tokens[k]
            if tok.kind == BLOCK_COMMENT and tok.lstart < line_start:
                line_start = text.rfind("\n", 0, tok.lstart) + 1
            k -= 1
        head = text[line_start:at]
        if "#" not in head and "%:" not in head:
            return False
        pieces, last = [], line_start
        for tok in self.tokens[k + 1 :]:  # a raw string may start on an earlier line
            pieces.append(text[last : max(last, tok.lstart)])
            pieces.append(" " if tok.kind in COMMENTS else text[max(last, tok.lstart) : tok.lend])
            last = tok.lend
        pieces.append(text[last:at])
        line = "".join(pieces).replace("%:", "#")
        return len(line) <= _INCLUDE_HEAD_MAX and bool(_INCLUDE_HEAD.match(line))


@functools.lru_cache(maxsize=32)
def lex(source: str) -> Lexed:
    """The comments, literals and header names of `source`, in order (memoised by text: every
    reader of a file asks for the same text's tokens)."""
    return _Lexer(source).run()


def blank(source: str, keep: Callable[[Token, str], bool] | None = None) -> str:
    """`source` with each comment and literal replaced by spaces (its newlines kept), but for
    the tokens `keep(token, its text)` keeps; header names stay. Offsets and lines are the
    source's."""
    tokens = lex(source).tokens
    if not tokens:
        return source
    pieces: list[str] = []
    last = 0
    for tok in tokens:
        if tok.kind == HEADER_NAME:
            continue
        piece = source[tok.start : tok.end]
        if keep is not None and keep(tok, piece):
            continue
        pieces.append(source[last : tok.start])
        pieces.append(re.sub(r"[^\n]", " ", piece))
        last = tok.end
    pieces.append(source[last:])
    return "".join(pieces)


@functools.lru_cache(maxsize=32)
def blank_comments(source: str) -> str:
    """The source with comments and string and character literals replaced by spaces, newlines
    kept, so that offsets and line numbers still match."""
    return blank(source)


def _is_literal(tok: Token, _text: str) -> bool:
    return tok.kind in LITERALS


@functools.lru_cache(maxsize=32)
def blank_comments_keep_strings(source: str) -> str:
    """The source with its comments replaced by spaces (literals kept), newlines kept."""
    return blank(source, _is_literal)


# --- brackets, over blanked text ----------------------------------------------------------------

_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_BACK_PAIRS = {close: open_ for open_, close in _PAIRS.items()}
_OPENERS = "([{"
_CLOSERS = ")]}"


def _partner(code: str, at: int, partner: str, indices: range, stop: str) -> int:
    """The first offset of `indices` where `partner` closes the bracket at `at` (counting only
    brackets of its kind), or -1 when none does or a character of `stop` comes first."""
    same, depth = code[at], 0
    for i in indices:
        c = code[i]
        if c == same:
            depth += 1
        elif c == partner:
            depth -= 1
            if depth == 0:
                return i
        elif c in stop:
            return -1
    return -1


def matching(code: str, at: int, end: int | None = None, stop: str = "") -> int:
    """The offset of the bracket that closes the one at `at` ((), [], {} or template <>), or -1
    when none does before `end` or before a character of `stop` at any depth. Only brackets of
    the same kind count, so text that is not balanced elsewhere does not move the answer."""
    bound = len(code) if end is None else min(end, len(code))
    return _partner(code, at, _PAIRS[code[at]], range(at, bound), stop)


def matching_back(code: str, at: int) -> int:
    """The offset of the bracket that the one at `at` (`)`, `]`, `}` or a template's `>`)
    closes, or -1."""
    return _partner(code, at, _BACK_PAIRS[code[at]], range(at, -1, -1), "")


def parenthesized(text: str) -> bool:
    """Whether the whole of `text` is one group in parentheses: `(a, b)` is, `(a) * (b)` is not."""
    return text.startswith("(") and matching(text, 0) == len(text) - 1


def enclosing_paren(code: str, at: int, stop: str = "", limit: int | None = None) -> int:
    """The offset of the `(` whose list holds `at` (the innermost), or -1 when a character of
    `stop` or the `limit`-th character back comes first."""
    depth = 0
    low = -1 if limit is None else max(-1, at - 1 - limit)
    for i in range(at - 1, low, -1):
        c = code[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                return i
            depth -= 1
        elif c in stop:
            return -1
    return -1


def is_template_open(text: str, at: int) -> bool:
    """Whether the `<` at `at` opens template arguments rather than comparing: it follows a name,
    is not a shift or a launch's `<<<`, and a `>` closes it before the statement or the
    expression around it ends (`;`, a brace, `?`, `&&`, `||`, an `=` that is no comparison, a
    bracket it did not open). `k<float, 256>` and `Tensor<void(int)>` are templates; `i < n` and
    `i < n ? a : b` are not."""
    if text.startswith("<<", at) or (at > 0 and text[at - 1] == "<"):
        return False
    if not re.search(r"[A-Za-z_]\w*\s*$", text[max(0, at - 200) : at]):
        return False
    depth, nested = 0, 0  # inner () and [], inner template <>
    i, n = at + 1, len(text)
    while i < n:
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                return False
            depth -= 1
        elif c in ";{}?" or text.startswith(("&&", "||"), i):
            return False
        elif depth:
            pass
        elif text.startswith(("->", ">=", "<=", "==", "!=", "<<"), i):
            i += 2
            continue
        elif c == "=":
            return False
        elif c == "<":
            nested += 1
        elif c == ">":
            if nested == 0:
                return True
            nested -= 1
        i += 1
    return False


def _spans(
    text: str, separators: tuple[str, ...], start: int, end: int | None, to_unmatched: bool
) -> Iterator[tuple[int, int]]:
    stop = len(text) if end is None else min(end, len(text))
    depth, angles, part, i = 0, 0, start, start
    while i < stop:
        c = text[i]
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            if depth == 0 and to_unmatched:
                stop = i
                break
            depth -= 1
        elif depth == 0 and c == "<" and is_template_open(text, i):
            angles += 1
        elif depth == 0 and angles and c == ">":
            angles -= 1
        elif depth == 0 and angles == 0:
            sep = next((s for s in separators if text.startswith(s, i)), None)
            if sep is not None:
                yield part, i
                i += len(sep)
                part = i
                continue
        i += 1
    yield part, stop


def _separators(seps: str | Sequence[str]) -> tuple[str, ...]:
    return (seps,) if isinstance(seps, str) else tuple(seps)


def top_level_spans(
    text: str,
    seps: str | Sequence[str] = ",",
    start: int = 0,
    end: int | None = None,
    to_unmatched: bool = False,
) -> list[tuple[int, int]]:
    """The (start, end) offsets of the parts of `text[start:end]` between its top-level separators
    (outside (), [], {} and template angle brackets): the parts and the separators between them
    give back the text. With `to_unmatched`, a closing bracket that closes nothing opened in the
    text ends the list (the end of an argument list whose `(` lies before `start`)."""
    return list(_spans(text, _separators(seps), start, end, to_unmatched))


def top_level_end(text: str, start: int, seps: str | Sequence[str], end: int | None = None) -> int:
    """Where the part of `text` that starts at `start` ends: at its first top-level separator,
    at a closing bracket that closes nothing opened after `start`, or at `end` (a statement's
    end is `top_level_end(body, start, ";")`)."""
    return next(_spans(text, _separators(seps), start, end, True))[1]


def split_top(text: str, seps: str | Sequence[str] = ",") -> list[str]:
    """`text` cut at its top-level separators (see `top_level_spans`), each part stripped."""
    return [text[a:b].strip() for a, b in top_level_spans(text, seps)]


def arguments(code: str, open_: int) -> list[str]:
    """The top-level arguments (stripped) inside the bracket at `open_`, up to the bracket that
    closes it (or the end of the text); [] for an empty list."""
    parts = [code[a:b].strip() for a, b in top_level_spans(code, ",", open_ + 1, to_unmatched=True)]
    return [] if parts == [""] else parts
