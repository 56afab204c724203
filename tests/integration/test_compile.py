"""The compile engine through real NVRTC (no GPU needed): diagnostics, resources, headers, cache,
and every way reading a file can fail."""

from __future__ import annotations

import os

import pytest

from kernel_lsp.check import check_path, check_source
from kernel_lsp.compile import (
    CompileOptions,
    check_arch,
    compile_file,
    compile_source,
    cuda_include_dirs,
    include_closure,
)
from kernel_lsp.config import Settings
from kernel_lsp.files import decode_source, read_source
from kernel_lsp.model import Severity

SM90 = CompileOptions(arch="sm_90")
VADD = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
__global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_clean_kernel_resources_and_occupancy(tmp_path):
    path = str(tmp_path / "vadd.cu")
    r = compile_source(VADD, path, SM90, use_cache=False)
    assert r.ok and r.diagnostics == [] and r.cubin
    (k,) = r.kernels
    assert (k.name, k.mangled, k.arch, k.line) == ("vadd", "_Z4vaddPKfS0_Pfi", "sm_90", 2)
    assert 4 <= k.registers <= 32 and not k.spills
    assert k.block_size == 256 and k.occupancy is not None and k.occupancy.fraction == 1.0


def test_error_has_line_column_and_range(broken_dir):
    r = compile_file(str(broken_dir / "error.cu"), SM90)
    assert not r.ok
    (d,) = r.diagnostics
    assert (d.line, d.col, d.end_col, d.severity) == (11, 27, 30, Severity.ERROR)
    assert d.message == 'identifier "idx" is undefined'


def test_warning_177_keeps_its_code(broken_dir):
    r = compile_file(str(broken_dir / "warning.cu"), SM90)
    assert r.ok
    (d,) = r.diagnostics
    assert (d.line, d.severity, d.code) == (10, Severity.WARNING, "177-D")


def test_header_error_on_header_and_at_include_line(broken_dir):
    path = str(broken_dir / "header_error.cu")
    r = compile_file(path, SM90)
    header = os.path.normpath(str(broken_dir / "broken_header.cuh"))
    on_header = [d for d in r.diagnostics if os.path.normpath(d.path) == header]
    on_file = [d for d in r.diagnostics if d.path == path]
    assert [(d.line, d.col) for d in on_header] == [(6, 12)]
    # Line 4 is the #include (after three comment lines).
    assert [d.line for d in on_file] == [4]
    assert "broken_header.cuh:6:12" in on_file[0].message
    assert on_file[0].related[0][:3] == (on_header[0].path, 6, 12)


def test_include_closure_lines_follow_nested_headers(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "a.cuh").write_text('// comment\n#include "b.cuh"\n')
    (tmp_path / "inc" / "b.cuh").write_text("#pragma once\n")
    src = '// one\n/* two\n three */\n#include "a.cuh"\n  #  include <cuda_fp16.h>\n'
    closure = include_closure(src, str(tmp_path / "k.cu"), (str(tmp_path / "inc"),))
    assert closure == {
        str(tmp_path / "a.cuh"): (4, "a.cuh"),
        str(tmp_path / "inc" / "b.cuh"): (4, "a.cuh"),
    }


def test_missing_header_says_where_it_looked(tmp_path):
    path = str(tmp_path / "miss.cu")
    r = compile_source('#include "nope.cuh"\n__global__ void k() {}\n', path, SM90, use_cache=False)
    (d,) = r.diagnostics
    assert d.severity == Severity.ERROR and d.line == 1
    assert "nope.cuh: No such file or directory" in d.message  # nvcc's words: it decides errors
    assert str(tmp_path) in d.message and "-I/--include DIR" in d.message


def test_include_dirs_option_finds_headers(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "h.cuh").write_text("#define WIDTH 128\n")
    src = '#include "h.cuh"\n__global__ void k(float* x) { x[WIDTH] = 0; }\n'
    path = str(tmp_path / "k.cu")
    assert not compile_source(src, path, SM90, use_cache=False).ok
    r = compile_source(src, path, CompileOptions(arch="sm_90", include_dirs=(str(tmp_path / "inc"),)))
    assert r.ok and r.includes == [str(tmp_path / "inc" / "h.cuh")]


def test_cuda_headers_from_the_wheels():
    assert len(cuda_include_dirs()) == 2
    src = "#include <cuda_bf16.h>\n#include <cuda/std/limits>\n__global__ void k(__nv_bfloat16* x) { x[0] = __float2bfloat16(cuda::std::numeric_limits<float>::max()); }\n"
    r = compile_source(src, "/tmp/kernel_lsp_bf16.cu", SM90, use_cache=False)
    assert r.ok, r.diagnostics


def test_defines_change_the_result(tmp_path):
    src = "__global__ void k(float* x) {\n#ifdef BROKEN\n  x[0] = y;\n#endif\n}\n"
    path = str(tmp_path / "d.cu")
    assert compile_source(src, path, SM90).ok
    r = compile_source(src, path, CompileOptions(arch="sm_90", defines=("BROKEN",)))
    assert not r.ok and r.diagnostics[0].line == 3


def test_spills_warn_at_the_kernel_with_bytes(tmp_path):
    src = """\
__global__ void big(float* out, const float* in, int n) {
  float acc[256];
  #pragma unroll
  for (int i = 0; i < 256; ++i) acc[i] = in[(threadIdx.x * 7 + i * 13) % n];
  float s = 0;
  #pragma unroll
  for (int i = 0; i < 256; ++i) s += acc[(i * 31) % 256] * acc[i];
  out[threadIdx.x] = s;
}
"""
    r = compile_source(src, str(tmp_path / "s.cu"), CompileOptions(arch="sm_90", extra=("-maxrregcount=32",)))
    (k,) = r.kernels
    assert k.spills and k.registers == 32
    (d,) = r.diagnostics
    assert d.code == "spill" and d.severity == Severity.WARNING and d.line == 1
    assert f"{k.spill_store_bytes} bytes spill stores" in d.message
    # ptxas' own line-less spill warning is folded into this one.
    assert not any(x.source == "ptxas" for x in r.diagnostics)


def test_rejected_option_is_one_clear_error(tmp_path):
    r = compile_source(VADD, str(tmp_path / "v.cu"), CompileOptions(arch="sm_90", extra=("--bogus",)))
    (d,) = r.diagnostics
    assert d.code == "option" and "--bogus" in d.message and d.severity == Severity.ERROR


@pytest.mark.parametrize("arch", ["sm_12", "sm_xx", "gfx90a", ""])
def test_unknown_arch_is_one_error_not_a_crash(arch):
    assert check_arch(arch)
    r = compile_source(VADD, "/tmp/kernel_lsp_arch.cu", CompileOptions(arch=arch))
    (d,) = r.diagnostics
    assert not r.ok and d.code == "arch" and "supports" in d.message


def test_known_archs_pass():
    for arch in ("sm_75", "sm_80", "sm_90", "sm_90a", "sm_100"):
        assert check_arch(arch) is None, arch


def test_cache_hits_on_same_content_and_options(tmp_path):
    path = str(tmp_path / "c.cu")
    first = compile_source(VADD + "// 1\n", path, SM90)
    again = compile_source(VADD + "// 1\n", path, SM90)
    assert not first.cached and again.cached and again.kernels == first.kernels
    assert not compile_source(VADD + "// 2\n", path, SM90).cached
    assert not compile_source(VADD + "// 1\n", path, CompileOptions(arch="sm_80")).cached


def test_cache_notices_a_changed_header(tmp_path):
    h = tmp_path / "h.cuh"
    h.write_text("#define V 1\n")
    src = '#include "h.cuh"\n__global__ void k(float* x) { x[0] = V; }\n'
    path = str(tmp_path / "k.cu")
    assert compile_source(src, path, SM90).ok
    h.write_text("#define V y_undefined\n")
    os.utime(h, ns=(1, 1))  # a different stamp even on coarse clocks
    r = compile_source(src, path, SM90)
    assert not r.cached and not r.ok


def test_empty_source_compiles_to_nothing():
    r = compile_source("", "/tmp/kernel_lsp_empty.cu", SM90, use_cache=False)
    assert r.ok and r.diagnostics == [] and r.kernels == []


# --- reading files ----------------------------------------------------------------------------


def test_not_utf8_is_read_with_a_note_and_columns_kept(tmp_path):
    text, note = decode_source(b"// caf\xe9\n__global__ void k() {}\n", str(tmp_path / "l1.cu"))
    assert text == "// caf?\n__global__ void k() {}\n"
    assert note.code == "not-utf8" and note.severity == Severity.INFO
    assert "not UTF-8" in note.message and "0xe9" in note.message and (note.line, note.col) == (1, 7)


def test_utf8_bom_is_dropped_and_columns_match_the_editor(tmp_path):
    body = "__global__ void k(float* x) { x[0] = nope; }\n"
    plain = compile_source(body, str(tmp_path / "a.cu"), SM90)
    text, note = decode_source(b"\xef\xbb\xbf" + body.encode(), str(tmp_path / "b.cu"))
    assert note is None and text == body
    with_bom = compile_source(text, str(tmp_path / "b.cu"), SM90)
    assert [(d.line, d.col, d.message) for d in with_bom.diagnostics] == [
        (d.line, d.col, d.message) for d in plain.diagnostics
    ]
    assert len(plain.diagnostics) == 1 and "nope" in plain.diagnostics[0].message


def test_binary_file(tmp_path):
    p = tmp_path / "bin.cu"
    p.write_bytes(bytes(range(256)) * 10)
    text, problem = read_source(str(p))
    assert text is None and "binary" in problem.message


def test_too_large(tmp_path):
    p = tmp_path / "big.cu"
    p.write_bytes(b"// x\n" * (1024 * 1024))  # 5 MB
    text, problem = read_source(str(p))
    assert text is None and "5.0 MiB" in problem.message and "maxFileBytes" in problem.message
    assert problem.severity == Severity.ERROR
    # The limit is a setting.
    text, problem = read_source(str(p), max_bytes=8 * 1024 * 1024)
    assert problem is None and text.startswith("// x")


def test_missing_file(tmp_path):
    text, problem = read_source(str(tmp_path / "gone.cu"))
    assert text is None and "no longer exists" in problem.message
    r = compile_file(str(tmp_path / "gone.cu"), SM90)
    assert not r.ok and r.diagnostics[0].code == "not-checked"


def test_check_path_marks_skips_and_missing(tmp_path):
    s = Settings(arch=("sm_90",))
    c = check_path(str(tmp_path / "gone.cu"), s)
    assert not c.checked and c.missing
    (tmp_path / "empty.cu").write_text("")
    c = check_path(str(tmp_path / "empty.cu"), s)
    assert c.checked and c.diagnostics == [] and c.errors == 0


def test_several_archs_merge_and_name_the_arch(tmp_path):
    src = "__global__ void k(float* x) {\n#if __CUDA_ARCH__ >= 900\n  x[0] = y;\n#endif\n}\n"  # sm_90 only
    c = check_source(src, str(tmp_path / "m.cu"), Settings(arch=("sm_80", "sm_90")))
    (d,) = c.diagnostics
    assert d.line == 3 and d.message.endswith("[sm_90]")
    assert [r.arch for r in c.results] == ["sm_80", "sm_90"]


def test_arch_check_asked_in_a_child_keeps_nvrtc_out_of_the_process():
    """The language server compiles nothing itself: its arch checks ask NVRTC in a child, and
    NVRTC's library (~44 MiB resident) is never loaded into it (issue 33). Run in a fresh
    interpreter: the choice is process-wide, and this test process may have NVRTC loaded."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from kernel_lsp.compile import ask_nvrtc_in_child, check_arch, supported_archs\n"
        "ask_nvrtc_in_child()\n"
        "print(json.dumps([check_arch('sm_90'), check_arch('sm_12'), list(supported_archs()),\n"
        "                  'cuda.bindings.nvrtc' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    known, unknown, listed, loaded = json.loads(out.stdout.splitlines()[-1])
    assert known is None
    assert unknown and "sm_12" in unknown and "supports: " in unknown and "sm_90" in unknown
    assert "sm_90" in listed and "sm_12" not in listed
    assert loaded is False
