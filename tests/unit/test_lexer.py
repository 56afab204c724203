"""The one C/C++ lexer (kernel_lsp/lexer.py): its views keep the text's offsets and lines, its
lists split where they were joined, its brackets pair up, over generated texts that are hard to
lex and over the repository's own sources. (What g++ and nvcc say about the same texts:
tests/integration/test_lexer_compiler.py.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_lsp.lexer import (
    BLOCK_COMMENT,
    COMMENTS,
    HEADER_NAME,
    LINE_COMMENT,
    RAW_STRING,
    STRING,
    blank_comments,
    blank_comments_keep_strings,
    lex,
    matching,
    matching_back,
    split_top,
    top_level_spans,
)
from kernel_lsp.source import find_includes, find_kernels, parse_params

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import itertools

from c_text import c_text, parameter_lists

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted(
    p
    for root in ("samples", "tests/fixtures")
    for p in (REPO / root).rglob("*")
    if p.suffix in (".cu", ".cuh")
)
# Any text at all, weighted to the characters a lexer decides on.
TRICKY = st.text(alphabet=st.sampled_from(list("/*\"'\\\nR(<>)#%:ab1 .,{}[];u8\r")), max_size=60)


def test_the_corpus_is_there():
    assert len(CORPUS) > 100


def _check_views(text: str) -> None:
    lexed = lex(text)
    blanked, kept = blank_comments(text), blank_comments_keep_strings(text)
    for view in (blanked, kept):
        assert len(view) == len(text)
        assert [i for i, c in enumerate(view) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]
    inside = {kind: set() for kind in ("comment", "literal")}
    last = 0
    for tok in lexed.tokens:
        assert last <= tok.start < tok.end <= len(text), "tokens in order, apart, inside the text"
        last = tok.end
        logical = lexed.logical[tok.lstart : tok.lend]
        if tok.kind == LINE_COMMENT:
            assert logical.startswith("//") and "\n" not in logical
        elif tok.kind == BLOCK_COMMENT:
            assert logical.startswith("/*")
        elif tok.kind == HEADER_NAME:
            assert logical.startswith("<")
        else:
            assert logical[:1] == ('"' if tok.kind in (STRING, RAW_STRING) else "'")
        if tok.kind != HEADER_NAME:
            inside["comment" if tok.kind in COMMENTS else "literal"].update(range(tok.start, tok.end))
    for i, (c, b, k) in enumerate(zip(text, blanked, kept, strict=True)):
        if i in inside["comment"]:
            assert b == k == (c if c == "\n" else " ")
        elif i in inside["literal"]:
            assert k == c and b == (c if c == "\n" else " ")
        else:
            assert b == k == c, f"code at {i} changed"


@given(st.one_of(c_text(), TRICKY))
@settings(max_examples=300)
def test_blanking_keeps_every_offset_and_line(text):
    _check_views(text)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(REPO)))
def test_blanking_keeps_every_offset_and_line_of_the_corpus(path):
    _check_views(path.read_text(errors="replace"))


@given(TRICKY, st.sampled_from([",", ";", "::", " ", ("&&", "||")]))
def test_splitting_then_joining_gives_back_the_text(text, seps):
    spans = top_level_spans(text, seps)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert text[end:start] in ((seps,) if isinstance(seps, str) else seps)


@given(parameter_lists)
def test_a_parameter_list_splits_where_it_was_joined(params):
    """Commas inside template arguments, function pointers, arrays and default arguments (with
    a `<` that compares) are no parameter's end."""
    assert split_top(", ".join(params)) == (list(params) if params else [""])
    parsed = parse_params(", ".join(params))
    assert len(parsed) == len(params)
    for param, text in zip(parsed, params, strict=True):
        if "(*" not in text:
            assert param.name == re.search(r"\bp\d+\b", text).group(0), text


_BALANCED = st.recursive(
    st.sampled_from(["", "a", "1", " ", ",", "<", ">", ";"]),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["()", "[]", "{}"]), inner).map(lambda t: t[0][0] + t[1] + t[0][1]),
        st.lists(inner, max_size=4).map("".join),
    ),
)


@given(_BALANCED)
def test_each_bracket_finds_its_partner_and_back(text):
    for i, c in enumerate(text):
        if c in "([{":
            close = matching(text, i)
            assert close > i and text[close] == {"(": ")", "[": "]", "{": "}"}[c]
            assert matching_back(text, close) == i


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(REPO)))
def test_brackets_of_the_corpus_pair_up_both_ways(path):
    code = blank_comments(path.read_text(errors="replace"))
    for i, c in enumerate(code):
        if c in "([{":
            close = matching(code, i)
            assert close < 0 or matching_back(code, close) == i


# --- what the old readers got wrong (each case failed before the one lexer) ---------------------


def test_a_digit_separator_starts_no_character_literal():
    src = "constexpr int N = 1'024; __global__ void k(float* x) {} // don't\n"
    assert [k.name for k in find_kernels(src)] == ["k"]


def test_a_line_comment_ending_in_a_splice_holds_the_next_line():
    src = "// the old kernel, kept for reference: \\\n__global__ void ghost(int* x) {}\n__global__ void real(int* x) {}\n"
    assert [k.name for k in find_kernels(src)] == ["real"]


def test_a_raw_string_is_one_literal():
    src = 'const char* s = R"(a "/*)";\n__global__ void k(int* y) {}\n// */\n__global__ void j() {}\n'
    assert [k.name for k in find_kernels(src)] == ["k", "j"]


def test_a_spliced_comment_start_is_a_comment():
    src = "/\\\n* __global__ void ghost() {} *\\\n/\n__global__ void real() {}\n"
    assert [k.name for k in find_kernels(src)] == ["real"]


def test_a_header_name_holds_no_comment():
    assert [i.target for i in find_includes("#include <vendor//tile.cuh>\n")] == ["vendor//tile.cuh"]


def test_template_arguments_and_comparisons_in_parameters():
    params = parse_params("Vec<float, (4 > 2)> v, int n = (a < b), Pair<int, Pair<int, int>> p")
    assert [p.name for p in params] == ["v", "n", "p"]
