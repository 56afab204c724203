"""The source reader: kernels, directives and includes, without compiling."""

from __future__ import annotations

from kernel_lsp.source import find_includes, find_kernels, parse_directives


def test_definition_wins_over_declaration_and_explicit_instantiation():
    src = (
        "__global__ void k(float* a);\n"
        "template <typename T>\n"
        "__global__ void t(T* a) { a[0] = 1; }\n"
        "__global__ void k(float* a) { }\n"
        "template __global__ void t<float>(float*);\n"
        "template __global__ void t<vec<2>>(vec<2>*);\n"
    )
    found = {k.name: k for k in find_kernels(src)}
    assert set(found) == {"k", "t"}
    assert (found["t"].line, found["t"].templated, found["t"].definition) == (3, True, True)
    assert (found["k"].line, found["k"].definition) == (4, True)


def test_launch_bounds_extern_c_and_params():
    src = 'extern "C" __global__ void __launch_bounds__(256, 2) vadd(const float* __restrict__ a, int n) {}\n'
    (k,) = find_kernels(src)
    assert k.name == "vadd" and k.extern_c
    assert [(p.name, p.base_type, p.is_pointer, p.is_const) for p in k.params] == [
        ("a", "float", True, True),
        ("n", "int", False, False),
    ]
    assert src[k.col - 1 :].startswith("vadd")


def test_kernels_in_comments_and_strings_are_ignored():
    src = '// __global__ void ghost(int x) {}\nconst char* s = "__global__ void g2()";\n/* __global__ void g3() */\n'
    assert find_kernels(src) == []


def test_directives_and_their_problems():
    src = (
        "// kernel-lsp: launch k grid = (cdiv(n, 32), m) block=(32, 8) smem=BLOCK*4\n"
        "// kernel-lsp: tune BLOCK=64,128 VEC=1,2,4\n"
        "// kernel-lsp: launch k block=256\n"
        "// kernel-lsp: lanch k\n"
    )
    d = parse_directives(src)
    assert [(x.kernel, x.grid, x.block, x.smem, x.line) for x in d.launches] == [
        ("k", "(cdiv(n, 32), m)", "(32, 8)", "BLOCK*4", 1)
    ]
    assert d.tune_space == {"BLOCK": ("64", "128"), "VEC": ("1", "2", "4")}
    assert [p.line for p in d.problems] == [3, 4]
    assert "missing grid" in d.problems[0].message


def test_include_lines_keep_their_numbers():
    src = '// a comment\n\n#include "a.cuh"\n  #  include <cuda_bf16.h>\n// #include "commented.cuh"\n'
    assert [(i.target, i.line, i.quoted) for i in find_includes(src)] == [
        ("a.cuh", 3, True),
        ("cuda_bf16.h", 4, False),
    ]
