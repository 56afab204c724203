"""Hypothesis strategies for C/C++ text that is hard to lex: comments and literals holding each
other's markers, raw strings, digit separators, line splices anywhere (between a comment's `/`
and `*`, inside literals, at a `//` comment's end), directives; and parameter lists whose commas
hide in templates, function pointers and default arguments. Every text is one the preprocessor
accepts (unterminated ordinary literals are warnings), so g++ can say what it means."""

from __future__ import annotations

from hypothesis import strategies as st

SPLICE = "\\\n"

# Characters a comment's or a literal's body is made of: the other kinds' markers among them.
_BODY = st.lists(
    st.sampled_from(["a", " ", "/", "*", "'", '"', "//", "/*", "x", "(", ")", "\\\\", "R", "<", ">", "%:"]),
    max_size=8,
).map("".join)


def _no(marker: str, body: str) -> str:
    while marker in body:
        body = body.replace(marker, "")
    return body


def _spliced(parts: list[str], where: list[bool]) -> str:
    """`parts` joined, with a splice between two of them where `where` says."""
    out = parts[0]
    for part, splice in zip(parts[1:], where, strict=False):
        out += (SPLICE if splice else "") + part
    return out


@st.composite
def _block_comment(draw: st.DrawFn) -> str:
    body = _no("*/", draw(_BODY) + draw(st.sampled_from(["", "\n", " x\n y"])))
    return _spliced(["/", "*", body, "*", "/"], draw(st.lists(st.booleans(), min_size=4, max_size=4)))


@st.composite
def _line_comment(draw: st.DrawFn) -> str:
    body = draw(_BODY).replace("\n", " ")
    # A splice at its end carries the comment over the next line, which the comment then holds.
    end = draw(st.sampled_from(["\n", "\n", SPLICE + "int hidden;\n"]))
    return _spliced(["/", "/", body], draw(st.lists(st.booleans(), min_size=2, max_size=2))) + end


@st.composite
def _string(draw: st.DrawFn) -> str:
    body = draw(_BODY).replace('"', '\\"')
    body = body.replace("\\\\\\", "\\\\")  # no backslash left alone before the closing quote
    if body.endswith("\\") and not body.endswith("\\\\"):
        body += "\\"
    prefix = draw(st.sampled_from(["", "u8", "L"]))
    inside = draw(st.booleans())
    return prefix + '"' + (SPLICE if inside else "") + body + '"'


_CHARS = st.sampled_from(["'a'", "'\\''", "'\"'", "'/'", "'*'", "u8'x'", "L'\\\\'"])


@st.composite
def _raw_string(draw: st.DrawFn) -> str:
    delimiter = draw(st.sampled_from(["", "d", "xy"]))
    body = _no(")" + delimiter + '"', draw(_BODY) + draw(st.sampled_from(["", "\n", SPLICE, '*/ "'])))
    return draw(st.sampled_from(["R", "u8R", "LR"])) + '"' + delimiter + "(" + body + ")" + delimiter + '"'


_NUMBERS = st.sampled_from(["1", "1'000", "0x1'ff", ".5", "1e+5", "0'1", "3'4'5u"])
_CODE = st.sampled_from(
    [
        "a",
        "x1",
        "k",
        "R",
        "u8",
        "L",
        "+",
        "-",
        "*",
        "/",
        "<",
        ">",
        "<<",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ";",
        "::",
        "?",
        ":",
        "&&",
        "=",
        "%",
        "'",
    ]
)
_DIRECTIVES = st.sampled_from(
    ["#define M(a) a /* one line */ + 1", '#define S "/*" // not a comment start', "#if 0"]
)


@st.composite
def c_text(draw: st.DrawFn) -> str:
    """A text the preprocessor accepts, mixing code, comments, literals and splices."""
    piece = st.one_of(
        _CODE, _NUMBERS, _block_comment(), _line_comment(), _string(), _CHARS, _raw_string(), st.just("\n")
    )
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(_DIRECTIVES))
            continue
        pieces = draw(st.lists(piece, min_size=1, max_size=8))
        # Mostly apart (as code is written), sometimes touching (`a/**/b`, `1'000'x'`).
        seps = draw(st.lists(st.sampled_from([" ", " ", "", SPLICE + " "]), min_size=len(pieces)))
        lines.append("".join(p + s for p, s in zip(pieces, seps, strict=False)))
    text = "\n".join(lines) + "\n"
    return text + "#endif\n" * text.count("#if 0")  # close what the directives opened


# --- parameter lists ---------------------------------------------------------------------------

# What the generated types need to compile (`PARAMETER_TYPES` first, then the kernel).
PARAMETER_TYPES = (
    "template <class A, class B> struct Pair {};\n"
    "template <class A, int V> struct Vec {};\n"
    "constexpr int N = 3;\n"
    "__host__ __device__ constexpr int f(int a, int b) { return a + b; }\n"
    "constexpr int a = 1, b = 2;\n"
)
_SCALARS = st.sampled_from(["int", "float", "const float*", "float* __restrict__", "unsigned long long"])
_VALUES = st.sampled_from(["2", "(4 > 2)", "N + 1", "f(1, 2)"])


def _type(depth: int = 0) -> st.SearchStrategy[str]:
    """An abstract type: scalars, templates (commas and `>` inside), function pointers."""
    if depth >= 2:
        return _SCALARS
    inner = _type(depth + 1)
    return st.one_of(
        _SCALARS,
        st.builds("Pair<{}, {}>".format, inner, inner),
        st.builds("Vec<{}, {}>".format, inner, _VALUES.filter(lambda v: "f(" not in v)),
        st.lists(inner, max_size=3).map(lambda args: f"void (*)({', '.join(args)})"),
    )


@st.composite
def parameter(draw: st.DrawFn, index: int = 0) -> str:
    """One parameter declaration: a type, a name, perhaps an array or a default argument whose
    commas and comparisons sit inside brackets."""
    name = f"p{index}"
    written = draw(_type())
    if written.startswith("void (*)"):
        return written.replace("(*)", f"(*{name})", 1)
    if draw(st.integers(0, 3)) == 0:  # an int with a default argument that hides commas or compares
        return f"int {name} = " + draw(
            st.sampled_from(["f(1, 2)", "(a < b)", "a < b ? 1 : 2", "int{2}", "N > 1"])
        )
    return f"{written} {name}" + draw(st.sampled_from(["", "", "[4]"]))


# Parameters with a default argument come last, as C++ wants them.
parameter_lists = st.integers(0, 6).flatmap(
    lambda n: st.tuples(*[parameter(i) for i in range(n)]).map(
        lambda ps: tuple(sorted(ps, key=lambda p: " = " in p))
    )
)
