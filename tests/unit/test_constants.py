"""The one evaluator of C constant expressions (kernel_lsp.constants.cexpr) and of a file's constants
(kernel_lsp.constants), and the three readers that used to disagree now agreeing through it."""

from __future__ import annotations

import pytest

from kernel_lsp.compile.artifact import literal_launch_value
from kernel_lsp.constants import macro_values, read_constants
from kernel_lsp.constants.cexpr import Evaluator, int_value, parse, to_c, to_python
from kernel_lsp.optimizer.tunables import define_values
from kernel_lsp.spec import source_constants


def value(text: str, names: dict[str, int] | None = None):
    return read_constants("").evaluate(text, names)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(2*128)", 256),
        ("256u", 256),
        ("1UL << 10", 1024),
        ("0x100 | 0b1", 257),
        ("010", 8),  # octal, as C reads it
        ("1'000", 1000),
        ("-7 / 2", -3),  # C truncates toward zero
        ("-7 % 2", -1),
        ("7 // 2", 3),  # a launch comment's Python floor division
        ("(n + 255) / 256", 4),
        ("n > 512 ? 128 : 256", 128),
        ("!0 + !5", 1),
        ("~0 & 0xff", 255),
        ("3 == 3 && 2 < 1", 0),
        ("(int)3.9", 3),
        ("static_cast<unsigned>(-1)", 4294967295),
        ("int(2.5) * 2", 4),
        ("sizeof(float) * 32", 128),
        ("sizeof(double2)", 16),
        ("sizeof(unsigned long long)", 8),
        ("std::min<int>(n, 1024)", 1000),
        ("max(n, 2048)", 2048),
        ("(int)ceil((float)n / 256)", 4),
        ("cdiv(n, 256)", 4),
        ("(16, 16)", (16, 16)),
    ],
)
def test_c_integer_expressions(text, expected):
    assert value(text, {"n": 1000}) == expected


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",  # never Python's eval
        "().__class__",
        "n +",
        "1 << 100000",  # a shift past 64 bits is not evaluated
        "1 / 0",
        "x[",
        "a" * 5000,  # too long
        "(" * 500 + "1" + ")" * 500,  # nested too deeply
    ],
)
def test_what_is_not_a_constant_gives_none(text):
    assert value(text) is None


def test_partial_evaluation_keeps_names_and_renders_cdiv():
    ev = read_constants("#define THREADS 256\n").evaluator()
    e = ev.simplify(parse("(n + THREADS - 1) / THREADS"))
    assert to_python(e) == "cdiv(n, 256)"
    assert to_c(e) == "(n + 255) / 256"
    e = ev.simplify(parse("(rows + tile - 1) / tile"))
    assert to_python(e) == "cdiv(rows, tile)"
    assert to_python(ev.simplify(parse("a & b == c"))) == "a & (b == c)"  # C precedence kept
    cond = ev.simplify(parse("n < 1024 ? 128 : THREADS"))
    assert to_python(cond) == "128 if n < 1024 else 256"
    assert int_value(Evaluator(lambda name: parse("2000") if name == "n" else None).simplify(cond)) == 256


SOURCE = """
#define BLOCK (2*128)
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))
#ifndef TILE
#define TILE 32u   // the default
#endif
#define TILE 64
#define NAME "text"
#define TWICE(x) ((x) * 2)
#define WARPS (BLOCK / WARP)
#define WARP 32
#define SELF (SELF + 1)
constexpr int kThreads = BLOCK / 2;
static const int kWarps = kThreads / 32;
enum { A = 4, B, C = A * 8 };
namespace ns { constexpr unsigned NS = 7u; }
extern "C" { const int EC = 3; }
__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
void f() { const int local = 5; }
struct S { static constexpr int member = 9; };
"""


def test_a_files_constants():
    c = read_constants(SOURCE, ["TILE=16"])
    assert c.values() == {
        "TILE": 16,  # -D wins over the #ifndef default
        "BLOCK": 256,
        "WARPS": 8,  # defined through a macro that comes later
        "WARP": 32,
        "kThreads": 128,
        "kWarps": 4,
        "A": 4,
        "B": 5,
        "C": 32,
        "NS": 7,
        "EC": 3,
    }
    assert c.kinds["kThreads"] == "constexpr" and c.lines["BLOCK"] == 2 and c.kinds["TILE"] == "-D"
    assert c.evaluate("CEIL_DIV(1000, BLOCK)") == 4
    assert c.evaluate("ceil_div(1000, kThreads)") == 8
    assert c.evaluate("TWICE(BLOCK) + TILE") == 528
    assert c.value("SELF") is None and c.value("NAME") is None
    assert "local" not in c.raw and "member" not in c.raw  # not at file scope
    assert read_constants(SOURCE).value("TILE") == 32  # the first #define, as the guard does


def test_the_three_former_readers_agree():
    # The launch comments' reader (compile/artifact), the spec's (spec.source_constants) and the
    # tuner's (optimizer/tunables) each had their own rules: last or first #define, (2*128) or not.
    source = "#define BLOCK (2*128)\n#define ITEMS 4u\n#ifndef VEC\n#define VEC 2\n#endif\n#define VEC 8\n"
    for defines in ((), ("VEC=4",), ("ITEMS=1",)):
        spec = source_constants(source, defines)
        tuner = define_values(source, defines)
        assert spec == tuner == macro_values(source, defines)
        for name, v in spec.items():
            assert literal_launch_value(name, defines, source) == v
    assert source_constants(source) == {"BLOCK": 256, "ITEMS": 4, "VEC": 2}
    assert literal_launch_value("(BLOCK, ITEMS)", (), source) == (256, 4)
    assert literal_launch_value("cdiv(n, BLOCK)", (), source) is None  # needs a size
