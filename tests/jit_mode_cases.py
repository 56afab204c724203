"""Texts NVRTC's JIT mode refuses, or takes, for want of an execution or memory space: the table
hostcode.find_unannotated is held to (tests/unit/test_verdict.py), and which NVRTC itself
is asked about (tests/integration/test_nvcc_truth.py), so the table cannot drift from NVRTC."""

KERNEL = "__global__ void k(int* o) { o[0] = 1; }\n"

# (name, text, whether NVRTC refuses it)
JIT_MODE_CASES: list[tuple[str, str, bool]] = [
    ("inline function", "inline int round_up(int n, int m) { return (n + m - 1) / m * m; }\n", True),
    ("static function", "static int twice(int a) { return 2 * a; }\n", True),
    ("declaration only", "int launch(int a);\n", True),
    ("constexpr function", "constexpr int window() { return 5; }\n", True),
    ("function template", "template <class T> T same(T a) { return a; }\n", True),
    ("member function", "struct Shape { int t; int blocks(int n) const { return n / t; } };\n", True),
    (
        "member of an aligned struct",
        "struct __align__(16) P { float x; float twice() const { return 2 * x; } };\n",
        True,
    ),
    ("constructor with a body", "struct S { int x; S() : x(0) {} };\n", True),
    ("operator", "struct V { float x; };\nV operator+(V a, V b) { return {a.x + b.x}; }\n", True),
    ("extern C launcher", 'extern "C" {\nvoid launch(int* o);\n}\n', True),
    ("namespace variable", "int counter = 0;\n", True),
    ("defaulted constructor", "struct S { S() = default; int x; };\n", False),
    ("const variable", "const int N = 4;\n", False),
    ("constexpr variable", "constexpr int M = 4;\n", False),
    ("device member", "struct S { __device__ int g() const { return 1; } };\n", False),
    ("host device macro", "#define HD __host__ __device__\nHD inline int f(int a) { return a; }\n", False),
    ("device function in a namespace", "namespace a { __device__ int f(int x) { return x; } }\n", False),
    ("memory spaces", "extern __shared__ float s[];\n__constant__ float c[4] = {1, 2, 3, 4};\n", False),
    ("plain struct", "struct P { float x; };\ntypedef struct { int a; } Q;\nusing R = P;\n", False),
    (
        "templated kernel and its instance",
        "template <typename T, int N>\n__global__ void __launch_bounds__(256) t(T* o) { o[0] = N; }\n"
        "template __global__ void t<float, 4>(float*);\n",
        False,
    ),
    (
        "lambda in a kernel",
        "__global__ void l(int* o) { auto f = [](int a) { return a + 1; }; o[0] = f(1); }\n",
        False,
    ),
]
