"""The fence's security review: ways around its include, libc-address and asm rules, and the
attacks tried after it. Each hostile candidate is refused by a static check (most by the text,
before any compiler reads it; the rest by the host object or the compiler's own warning, before
anything is linked or loaded). Honest launchers that look alike still pass, and compile errors
sent back to the LLM never quote a file but the candidate."""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from kernel_lsp import fence
from kernel_lsp.compile import CompileOptions, compile_nvcc, cuda_include_dirs, find_toolchain, shared_lib
from kernel_lsp.compile.shared_lib import compile_library
from kernel_lsp.fence import check_object, check_source
from kernel_lsp.fence.object_checks import check_instructions
from kernel_lsp.fence.text import clean, directives
from kernel_lsp.model import CompileResult, Diagnostic, Severity
from kernel_lsp.optimizer.evaluator import IN_HEADER, MAX_COMPILE_LOG_CHARS, compile_log, own_file_log
from kernel_lsp.optimizer.extract import extract_candidate

REPO = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")

ORIGINAL = """#include <cuda_runtime.h>
#include "helpers.h"
__global__ void scale_kernel(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
extern "C" void scale(const float* x, float* y, int n) { scale_kernel<<<1, 256>>>(x, y, n); }
"""


def candidate(body: str = "", top: str = "", inc: str = "") -> str:
    """A candidate file: `inc` after the first include, `top` before the kernel, `body` in the
    launcher (line 4 when `inc` and `top` are empty)."""
    return (
        "#include <cuda_runtime.h>\n"
        + inc
        + top
        + "__global__ void scale_kernel(const float* x, float* y, int n) "
        "{ int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"
        'extern "C" void scale(const float* x, float* y, int n) {\n'
        + body
        + "\n    scale_kernel<<<1, 256>>>(x, y, n);\n}\n"
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "helpers.h").write_text("#pragma once\ninline int helper(int v) { return v; }\n")
    return tmp_path


def text_findings(folder: Path, source: str, original: str = ORIGINAL):
    return check_source(source, original, str(folder / "original.cu"), cuda_include_dirs())


# --- 1. includes that escape ---------------------------------------------------------------

INCLUDE_BYPASSES = {
    "cuda/..": (candidate(inc="#include <cuda/../../../../etc/passwd>\n"), "`..` component"),
    "thrust/..": (candidate(inc="#include <thrust/../../../../etc/passwd>\n"), "`..` component"),
    "cub/..": (candidate(inc="#include <cub/../../../../etc/passwd>\n"), "`..` component"),
    "digraph %:include": (candidate(inc='%:include "/etc/passwd"\n'), "an absolute path"),
    "digraph with spaces": (candidate(inc="  %:  include <cuda/../../x>\n"), "`..` component"),
    "trigraph ??=include": (candidate(inc='??=include "/etc/passwd"\n'), "the trigraph `??=`"),
    "#import": (candidate(inc='#import "helpers.h"\n'), "#import"),
    "#include_next": (candidate(inc="#include_next <cstdio>\n"), "#include_next"),
    "#/**/include": (candidate(inc='#/**/include "/etc/passwd"\n'), "an absolute path"),
    "comment across lines": (candidate(inc='#include /*\n*/ "/etc/passwd"\n'), "an absolute path"),
    "line splice": (candidate(inc='#inc\\\nlude "/etc/passwd"\n'), "an absolute path"),
    "line splice with blanks": (candidate(inc='#inc\\  \nlude "/etc/passwd"\n'), "an absolute path"),
    "__has_include guard": (
        candidate(inc='#if __has_include("/etc/passwd")\n#include "/etc/passwd"\n#endif\n'),
        "`__has_include`",
    ),
    "__has_include probe": (candidate(inc="#if __has_include(<cuda/../../x>)\n#endif\n"), "`__has_include`"),
    "macro-named include": (candidate(inc="#define H <cuda/../../x>\n#include H\n"), "computed #include"),
    "macro-named original header": (
        candidate(inc='#define H "helpers.h"\n#include H\n'),
        "computed #include",
    ),
    "#embed": (candidate(top='const unsigned char d[] = {\n#embed "/etc/passwd"\n};\n'), "#embed"),
    "backslash": (candidate(inc="#include <cuda\\..\\..\\x.h>\n"), "a backslash"),
    "absolute quoted": (candidate(inc='#include "/etc/passwd"\n'), "an absolute path"),
    "a raw string's splice hides nothing": (
        candidate(top='const char* s = R"x(\\\n)x";\n#include "/etc/passwd"\n'),
        "an absolute path",
    ),
    # Attacks tried after the review. nvcc preprocesses twice: g++ -E, then cudafe++ reads that
    # output as source, so a `#` that g++ emits at the start of a line is a directive again.
    "a carriage return ends the line": (
        candidate(top='int a;\r#include "/etc/passwd"\rint b;\n'),
        "an absolute path",
    ),
    "a macro that expands to a directive": (
        candidate(top='#define INC # include "/etc/passwd"\nINC\n'),
        "a `#` that is not a directive's",
    ),
    "a digraph directive in a macro": (
        candidate(top="#define INC %: include <cuda/../../x>\nINC\n"),
        "a `#` that is not a directive's",
    ),
    "a splice before the directive": (
        candidate(top='int a; \\\n#include "/etc/passwd"\n'),
        "a `#` that is not a directive's",
    ),
    "a directive after an empty macro": (
        candidate(top='#define E\nE # include "/etc/passwd"\n'),
        "a `#` that is not a directive's",
    ),
    "%:pragma": (candidate(inc='%:pragma GCC optimize("O0")\n'), "#pragma GCC optimize"),
    "_Pragma": (candidate(top='_Pragma("GCC optimize")\n'), "#pragma GCC optimize"),
    "_Pragma with escapes": (candidate(top='_Pragma("GCC dependency \\"/etc/passwd\\"")\n'), "`_Pragma`"),
    "_Pragma built by ##": (
        candidate(top='#define CAT(a, b) a##b\nCAT(_Pra, gma)("GCC dependency \\"x\\"")\n'),
        "token pasting",
    ),
    "#pragma GCC dependency": (
        candidate(top='#pragma GCC dependency "/etc/passwd"\n'),
        "#pragma GCC dependency",
    ),
    "#line renames the file": (candidate(top='#line 1 "other.cu"\n'), "#line"),
    # Issue 46: thrust includes THRUST_MR_STD_MR_HEADER by name; defined by the candidate, nvcc
    # read a file outside and compiled a declaration-shaped one into the library.
    "a library header's configurable include": (
        candidate(
            top='#define THRUST_MR_STD_MR_HEADER "/etc/passwd"\n#include <thrust/mr/memory_resource.h>\n'
        ),
        "THRUST_MR_STD_MR_HEADER: a library header includes the file it names, and",
    ),
    "a library header's configurable include, through a macro": (
        candidate(
            top="#define P <x>\n#define THRUST_MR_STD_MR_HEADER P\n#include <thrust/mr/memory_resource.h>\n"
        ),
        'it is not <name> or "name"',
    ),
    "GCC line marker": (candidate(top='# 1 "other.cu"\n'), "#1"),
}


@pytest.mark.parametrize("name", sorted(INCLUDE_BYPASSES))
def test_include_bypasses_are_refused_before_any_compiler_reads_the_text(folder, monkeypatch, name):
    source, reason = INCLUDE_BYPASSES[name]
    findings = text_findings(folder, source)
    assert any(reason in f.message for f in findings), [f.describe() for f in findings]

    def no_compiler(*args, **kwargs):
        raise AssertionError("nvcc was run on a refused candidate")

    monkeypatch.setattr(shared_lib, "_compile_in_temp_dir", no_compiler)
    build = compile_library(
        source,
        str(folder / "original.cu"),
        CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs()),
        candidate_of=ORIGINAL,
        use_cache=False,
        fence=fence,
    )
    assert build.library is None and build.fence


def test_a_configurable_library_include_that_names_an_allowed_header_passes(folder):
    if "THRUST_MR_STD_MR_HEADER" not in fence.includes.configurable_include_macros():
        pytest.skip("no thrust headers here")
    honest = candidate(top="#define THRUST_MR_STD_MR_HEADER <memory>\n")
    assert [f.describe() for f in text_findings(folder, honest)] == []


def test_a_header_of_the_original_must_resolve_inside_its_folder(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.h").symlink_to(outside)
    findings = check_source(candidate(inc='#include "helpers.h"\n'), ORIGINAL, str(project / "original.cu"))
    assert [f.message for f in findings] == ['#include "helpers.h" leads outside the original\'s folders']


def test_cuda_headers_must_be_in_cudas_folders(folder):
    if not fence.includes.cuda_include_roots():
        pytest.skip("no CUDA include folder here")
    findings = text_findings(folder, candidate(inc="#include <cuda/not_a_header_at_all.h>\n"))
    assert [f.kind for f in findings] == ["include"] and "CUDA's include folders" in findings[0].message


def test_the_scanner_reads_directives_as_the_preprocessor_does():
    text = '#inc\\\nlude <a.h>\n%:/* x */define X 1\n#/*\n*/pragma once\nint a = 1\'000; // #include "b.h"\n'
    assert [(d.name, d.rest.strip(), d.line) for d in directives(clean(text))] == [
        ("include", "<a.h>", 1),
        ("define", "X 1", 3),
        ("pragma", "once", 4),
    ]


# --- 2. libc found at run time ------------------------------------------------------------

ADDRESS_BYPASSES = {
    "&printf": (candidate("    void* p = (void*)&printf;"), "`printf` as a value"),
    "(void*)printf": (candidate("    void* p = (void*)printf;"), "`printf` as a value"),
    "printf + offset": (
        candidate('    auto f = (void (*)(const char*))((char*)printf + 0x1234);\n    f("sh");'),
        "`printf` as a value",
    ),
    "a cudart function cast to an integer": (
        candidate("    unsigned long a = (unsigned long)cudaMalloc;"),
        "`cudaMalloc` as a value",
    ),
    "dl_iterate_phdr": (candidate("    dl_iterate_phdr(0, 0);"), "`dl_iterate_phdr` walks"),
    "dladdr": (candidate("    dladdr(0, 0);"), "`dladdr` walks"),
    "dlsym": (candidate('    void* s = dlsym((void*)0, "system");'), "calls `dlsym`"),
    "_r_debug": (candidate(top="extern struct r_debug _r_debug;\n"), "`_r_debug` walks"),
    "link_map": (candidate("    struct link_map* m = 0;"), "`link_map` walks"),
    "__libc_*": (candidate("    void* p = (void*)__libc_start_main;"), "`__libc_start_main` walks"),
    "environ": (candidate(top="extern char** environ;\n"), "`environ` walks"),
    "__environ": (candidate("    char** e = __environ;"), "`__environ` walks"),
    "getauxval": (candidate("    unsigned long b = getauxval(33);"), "`getauxval` walks"),
    "_GLOBAL_OFFSET_TABLE_": (
        candidate(top='extern "C" char _GLOBAL_OFFSET_TABLE_[];\n'),
        "`_GLOBAL_OFFSET_TABLE_` walks",
    ),
    "/proc/self/maps": (candidate('    const char* m = "/proc/self/maps";'), "'/proc/'"),
    "return addresses": (
        candidate("    void* r = __builtin_return_address(0);"),
        "`__builtin_return_address`",
    ),
    "the frame": (candidate("    void* r = __builtin_frame_address(0);"), "`__builtin_frame_address`"),
    "the thread pointer": (
        candidate(
            top='__attribute__((target("fsgsbase"))) long tp() { return __builtin_ia32_rdfsbase64(); }\n'
        ),
        "`__builtin_ia32_rdfsbase64`",
    ),
    "longjmp": (candidate("    longjmp(0, 1);"), "`longjmp`"),
    "stderr as a libc address": (
        candidate("    char* libc = (char*)stderr - 0x1000;"),
        "`stderr` used other",
    ),
    "stdout kept": (candidate("    void* o = stdout;"), "`stdout` used other"),
    "own function to an integer": (
        candidate("    unsigned long k = (unsigned long)scale_kernel;"),
        "casts the function `scale_kernel` to `unsigned long`",
    ),
    "own function to a byte pointer": (
        candidate("    char* k = (char*)scale_kernel + 16;"),
        "casts the function `scale_kernel` to `char*`",
    ),
    "own function's void* moved": (
        candidate("    void* k = (void*)scale_kernel + 16;"),
        "arithmetic on the address of the function `scale_kernel`",
    ),
    "reinterpret_cast to bytes": (
        candidate("    auto k = reinterpret_cast<char*>(&scale_kernel);"),
        "casts the function `scale_kernel` to `char*`",
    ),
    "a cast laundered through void*": (
        candidate("    char* k = (char*)((void*)scale_kernel);"),
        "casts the function `scale_kernel` to `char*`",
    ),
    "&own function moved": (
        candidate("    auto k = &scale + 1;"),
        "arithmetic on the address of the function `scale`",
    ),
    "suppressing the warning the fence reads": (
        candidate(top="#pragma nv_diag_suppress 1143\n"),
        "a diagnostic the fence reads",
    ),
}


@pytest.mark.parametrize("name", sorted(ADDRESS_BYPASSES))
def test_reaching_for_libc_is_refused_in_the_text(folder, name):
    source, reason = ADDRESS_BYPASSES[name]
    findings = text_findings(folder, source)
    assert any(reason in f.message for f in findings), [f.describe() for f in findings]


def compile_object(folder: Path, source: str, name: str = "raw") -> Path:
    """The host object of `source` as the library build makes it (nvcc -c -fPIC), with no text
    check before it: what the object check alone would see."""
    src, obj = folder / f"{name}.cu", folder / f"{name}.o"
    src.write_text(source)
    subprocess.run(
        [find_toolchain().nvcc, "-c", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(obj), str(src)],
        check=True,
        capture_output=True,
    )
    return obj


@needs_nvcc
@pytest.mark.parametrize(
    "body, symbol",
    [
        ('    void* p = (void*)printf;\n    ((int (*)(const char*))((char*)p + 0x1234))("sh");', "printf"),
        ('    auto p = &puts;\n    p("x");', "puts"),
        ("    float (*f)(float) = &sqrtf;\n    y[0] = f(2.0f);", "sqrtf"),
        ("    static void* keep = (void*)&cudaFree;\n    (void)keep;", "cudaFree"),
    ],
)
def test_the_object_check_sees_an_imported_functions_address(tmp_path, body, symbol):
    source = candidate(body, inc="#include <cstdio>\n#include <cmath>\n")
    findings = check_object(str(compile_object(tmp_path, source)))
    assert [f.symbol for f in findings if f.kind == "address"] == [symbol], [f.message for f in findings]


@needs_nvcc
def test_a_math_functions_address_passes_the_text_but_not_the_object(folder):
    # `sqrtf` is a word the text leaves to the object check (a variable may be called `exp`).
    source = candidate("    float (*f)(float) = &sqrtf;\n    (void)f;", inc="#include <cmath>\n")
    assert text_findings(folder, source) == []
    build = compile_library(
        source,
        str(folder / "original.cu"),
        CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs()),
        candidate_of=ORIGINAL,
        use_cache=False,
        fence=fence,
    )
    assert build.library is None
    assert [(f.kind, f.symbol) for f in build.fence] == [("address", "sqrtf")]


@needs_nvcc
def test_arithmetic_on_a_functions_address_is_refused_by_the_compilers_warning(folder):
    # Bare `scale + 1` reads like arithmetic on a number; only the compiler knows it is a function.
    source = candidate("    void (*f)(const float*, float*, int) = scale + 1;\n    (void)f;")
    assert text_findings(folder, source) == []
    build = compile_library(
        source,
        str(folder / "original.cu"),
        CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs()),
        candidate_of=ORIGINAL,
        use_cache=False,
        fence=fence,
    )
    assert build.library is None and not build.ok
    assert [f.line for f in build.fence if "arithmetic on the address of a function" in f.message] == [4]


# --- 3. asm hidden ------------------------------------------------------------------------

ASM_BYPASSES = {
    "__device__ __host__": (
        candidate(top='__device__ __host__ void f() { asm volatile("syscall"); }\n'),
        "with `syscall`",
    ),
    "a system call in device code": (
        candidate(top='__device__ void f() { asm volatile("syscall"); }\n'),
        "with `syscall`",
    ),
    "a macro that expands to __host__": (
        candidate(top='#define HD __host__\n__device__ HD void f() { asm volatile("nop"); }\n'),
        "inline assembly in host code",
    ),
    "a macro that expands to nothing": (
        candidate(top='#define NOTHING\n__device__ NOTHING void f() { asm volatile("syscall"); }\n'),
        "with `syscall`",
    ),
    "a function-like macro in the head": (
        candidate(top='#define H(x) x\n__device__ H(__host__) void f() { asm volatile("nop"); }\n'),
        "inline assembly in host code",
    ),
    "a template from macros": (
        candidate(top='#define SC "sys" "call"\n__device__ void f() { asm volatile(SC); }\n'),
        "not plain string literals",
    ),
    "adjacent literals": (
        candidate(top='__device__ void f() { asm volatile("sys" "call"); }\n'),
        "with `syscall`",
    ),
    "an octal escape": (
        candidate(top='__device__ void f() { asm volatile("sys\\143all"); }\n'),
        "with `syscall`",
    ),
    "raw bytes": (
        candidate(top='__device__ void f() { asm volatile(".byte 0x0f, 0x05"); }\n'),
        "with `.byte`",
    ),
    "int $0x80": (candidate(top='__device__ void f() { asm volatile("int $0x80"); }\n'), "with `int $0x80`"),
    "sysenter": (candidate(top='__device__ void f() { asm volatile("sysenter"); }\n'), "with `sysenter`"),
    "__device__ in a string of the head": (
        candidate(top='void evil(const char* s = "__device__") { asm volatile("nop"); }\n'),
        "inline assembly in host code",
    ),
    "__device__ inside a name of the head": (
        candidate(top='void evil(int my__device__x) { asm volatile("nop"); }\n'),
        "inline assembly in host code",
    ),
    "a host attribute": (
        candidate(top='__device__ void evil() __attribute__((host)) { asm volatile("nop"); }\n'),
        "inline assembly in host code",
    ),
    "#if around the head": (
        candidate(
            top='#if 1\nvoid evil()\n#else\n__device__ void evil()\n#endif\n{ asm volatile("nop"); }\n'
        ),
        "inline assembly in host code",
    ),
    "digraph braces": (
        candidate(top='__device__ void g() <% %> void evil() <% asm volatile("nop"); %>\n'),
        "inline assembly in host code",
    ),
    "a splice in the keyword": (candidate('    as\\\nm volatile("nop");'), "inline assembly in host code"),
    "the keyword from a macro": (
        candidate('    A volatile("nop");', top="#define A asm\n"),
        "not plain string literals",
    ),
    "digit separators around it": (
        candidate("    int a = 1'0; asm volatile(\"syscall\"); int b = 2'0;"),
        "with `syscall`",
    ),
    "a __device__ constexpr function (relaxed constexpr compiles it for the host)": (
        candidate(
            top="__device__ constexpr int f(int v) {\n#ifndef __CUDA_ARCH__\n"
            '    if (v < 0) { asm volatile("movq %%fs:0, %%rax" ::: "rax"); }\n#endif\n    return v;\n}\n'
        ),
        "inline assembly in host code",
    ),
    "an asm label renaming a call": (
        candidate(top='extern "C" int my_puts(const char*) __asm__("system");\n'),
        "inline assembly in host code",
    ),
}


@pytest.mark.parametrize("name", sorted(ASM_BYPASSES))
def test_hidden_asm_is_refused(folder, name):
    source, reason = ASM_BYPASSES[name]
    findings = text_findings(folder, source)
    assert any(f.kind == "asm" and reason in f.message for f in findings), [f.describe() for f in findings]


@needs_nvcc
def test_every_executable_section_is_disassembled(tmp_path):
    # Past the text check (which refuses both the attribute and the asm): a system call in a
    # section of its own is still found by the object check.
    source = candidate(
        top='__attribute__((section(".text.evil"))) void evil() { asm volatile("syscall"); }\n'
    )
    findings = check_object(str(compile_object(tmp_path, source)))
    assert any(f.kind == "instruction" and "evil" in f.message for f in findings), findings
    missing = check_instructions(str(tmp_path / "raw.o"), [".text", ".text.not_there"])
    assert any("`.text.not_there` could not be disassembled" in f.message for f in missing)


# --- honest launchers that look like the attacks ------------------------------------------

HONEST = {
    "_Pragma unroll": candidate(top='_Pragma("unroll")\n'),
    "digit separators": candidate("    int big = 1'000'000;\n    (void)big;"),
    "kernels passed to the runtime": candidate(
        "    cudaFuncSetAttribute((const void*)scale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);\n"
        "    void* a[] = {(void*)&x, (void*)&y, (void*)&n};\n"
        "    cudaLaunchKernel(reinterpret_cast<const void*>(&scale_kernel), dim3(1), dim3(1), a, 0, 0);\n"
        "    int blocks = 0;\n"
        "    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale_kernel, 256, 0);"
    ),
    "printing to the streams": candidate(
        '    fprintf(stderr, "x %d\\n", n);\n    std::fprintf(stdout, "y\\n");\n    fflush(stdout);',
        inc="#include <cstdio>\n",
    ),
    "device PTX under a macro": candidate(
        top="#define DEVICE_INLINE __device__ __forceinline__\n"
        'DEVICE_INLINE unsigned lane() { unsigned l; asm volatile("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }\n'
    ),
    "a diagnostics pragma by number": candidate(top="#pragma nv_diag_suppress 177\n"),
    "CCCL and the original's header": candidate(
        inc='#include <cuda/std/atomic>\n#include <cub/cub.cuh>\n#include <thrust/device_vector.h>\n#include "helpers.h"\n'
    ),
    "conditional and template launches": candidate(
        "    if (n > 0) scale_kernel<<<1, 1>>>(x, y, n);\n    else (void)helper(n);",
        inc='#include "helpers.h"\n',
    ),
    "a comment that says #include": candidate('    // #include "/etc/passwd", asm("syscall"), &printf'),
    "stringizing and #error": candidate(
        "    CHECK(cudaGetLastError());",
        top='#define CHECK(call) do { if ((call) != cudaSuccess) printf("%s failed\\n", #call); } while (0)\n'
        "#if 0\n#error no # here\n#endif\n",
        inc="#include <cstdio>\n",
    ),
    "Windows line ends": candidate("    int k = 0;\n    (void)k;").replace("\n", "\r\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_launchers_that_look_alike_pass_the_text(folder, name):
    assert text_findings(folder, HONEST[name]) == []


def honest_corpus() -> list[tuple[str, str, str]]:
    """(name, candidate, original path): the entry samples and the scripted LLM's rewrites of
    them (tests/fixtures/entry_rewrites), extracted as the optimizer does."""
    out = []
    for path in sorted(glob.glob(str(REPO / "samples" / "entries" / "*.cu"))):
        out.append((os.path.basename(path), Path(path).read_text(), path))
    for answer in sorted(glob.glob(str(REPO / "tests" / "fixtures" / "entry_rewrites" / "*.md"))):
        original = REPO / "samples" / "entries" / (os.path.basename(answer).split(".")[0] + ".cu")
        spec = original.with_suffix(".spec.py").read_text()
        entry = re.search(r'entry="(\w+)"', spec).group(1)
        extracted = extract_candidate(Path(answer).read_text(), original.read_text(), [], entry=entry)
        if extracted.source:
            out.append((os.path.basename(answer), extracted.source, str(original)))
    return out


@needs_nvcc
def test_the_honest_corpus_passes_the_whole_fence():
    corpus = honest_corpus()
    assert len(corpus) >= 15
    options = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
    refused = {}
    for name, source, original in corpus:
        build = compile_library(
            source, original, options, candidate_of=Path(original).read_text(), use_cache=False, fence=fence
        )
        if build.fence:
            refused[name] = [f.describe() for f in build.fence]
        else:
            assert build.ok, (name, [d.message for d in build.result.diagnostics][:3])
    # The one hostile answer in the corpus (it locks the GPU's clocks with system()).
    assert refused == {
        "vector_add_bf16.system_call.md": ["line 14: calls `system`, which runs another program"]
    }


# --- compile errors sent back to the LLM --------------------------------------------------


@needs_nvcc
def test_a_compile_error_in_another_file_never_quotes_it(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("int SECRET_TOKEN_4242 = hunter2;\n")
    # The kernel path has no fence: NVRTC/nvcc read any include, the feedback must not repeat it.
    source = f'#include "{secret}"\n__global__ void k(float* y) {{ y[0] = undefined_here; }}\n'
    path = str(tmp_path / "candidate.cu")
    result = compile_nvcc(source, path, CompileOptions(arch="sm_90"), use_cache=False)
    assert not result.ok and "SECRET_TOKEN_4242" in result.log  # the compiler did print it
    feedback = compile_log(result)
    assert "SECRET_TOKEN_4242" not in feedback and "hunter2" not in feedback
    assert IN_HEADER in feedback
    assert "line 2:" in feedback and "undefined_here" in feedback  # the candidate's own error stays
    # With no parsed diagnostics, the raw log is filtered the same way.
    bare = CompileResult(path, "sm_90", False, log=result.log)
    assert "SECRET_TOKEN_4242" not in compile_log(bare) and "undefined_here" in compile_log(bare)


def test_the_raw_log_keeps_only_the_candidates_lines():
    log = (
        "/etc/passwd(1): error: this declaration has no storage class or type specifier\n"
        "  root:x:0:0:root:/root:/bin/bash\n"
        "  ^\n"
        "\n"
        "In file included from /work/c.cu:2:\n"
        "/home/u/.ssh/config:1:1: error: 'Host' does not name a type\n"
        "    1 | Host github.com\n"
        '/work/c.cu(5): error: identifier "z" is undefined\n'
        "  int a = z;\n"
        "          ^\n"
    )
    kept = own_file_log(log, "/work/c.cu")
    assert "root:x" not in kept and "github" not in kept and "Host" not in kept
    assert kept.splitlines()[0] == IN_HEADER
    assert '/work/c.cu(5): error: identifier "z" is undefined' in kept


def test_feedback_is_cut_to_its_share():
    path = "/work/c.cu"
    diagnostics = [Diagnostic(path, i, 1, Severity.ERROR, "x" * 1000) for i in range(1, 40)]
    diagnostics.append(Diagnostic("/usr/include/x.h", 3, 1, Severity.ERROR, "root:x:0:0"))
    text = compile_log(CompileResult(path, "sm_90", False, diagnostics))
    assert len(text) <= MAX_COMPILE_LOG_CHARS + 20 and "x" * 301 not in text
    header_only = compile_log(CompileResult(path, "sm_90", False, diagnostics[-1:]))
    assert header_only == IN_HEADER
