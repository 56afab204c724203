"""The NVRTC log parser on real logs (captured from NVRTC 13.x with --ptxas-options=-v), and a
property test: it never raises and never drops a line it did not understand."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_lsp.compile.logparse import parse_log, source_name
from kernel_lsp.model import Severity

# --- real logs --------------------------------------------------------------------------------

ERROR_LOG = """\
/work/main/samples/broken/error.cu(11): error: identifier "idx" is undefined
          y[i] = factor * x[idx];
                            ^

1 error detected in the compilation of "/work/main/samples/broken/error.cu".
\x00"""

SEVERAL_LOG = """\
/tmp/t/tmpl.cu(8): error: too few arguments in function call
    f(1.0f);
          ^

/tmp/t/tmpl.cu(10): error: expected a ";"
  }
  ^

/tmp/t/tmpl.cu(9): warning #177-D: variable "z" was declared but never referenced
    int z = 3
        ^

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

/tmp/t/tmpl.cu(2): error: expression must have class type but it has type "float"
  __device__ T twice(T v) { return v.bad; }
                                   ^
          detected during instantiation of "T twice(T) [with T=float]" at line 7

3 errors detected in the compilation of "/tmp/t/tmpl.cu".
 """

CATASTROPHIC_LOG = """\
/tmp/t/miss.cu(1): catastrophic error: cannot open source file "nope.cuh"
  #include "nope.cuh"
                     ^

1 catastrophic error detected in the compilation of "/tmp/t/miss.cu".
Compilation terminated.
 """

HEADER_LOG = """\
/work/main/samples/broken/broken_header.cuh(6): error: identifier "flaot" is undefined
  __device__ flaot squared(float v)
             ^

1 error detected in the compilation of "/work/main/samples/broken/header_error.cu".
\x00"""

PTXAS_LOG = """\
ptxas info    : Overriding maximum register limit 256 for '_Z3bigPfPKfi' with  32 of maxrregcount option
ptxas warning : Registers are spilled to local memory in function '_Z3bigPfPKfi', 1760 bytes spill stores, 2192 bytes spill loads
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN2ns2tkILi4EEEvPf' for 'sm_90'
ptxas info    : Function properties for _ZN2ns2tkILi4EEEvPf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
ptxas info    : Compile time = 6.170 ms
ptxas info    : Compiling entry function '_Z3bigPfPKfi' for 'sm_90'
ptxas info    : Function properties for _Z3bigPfPKfi
ptxas         .     1216 bytes stack frame, 1760 bytes spill stores, 2192 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0], 1216 bytes cumulative stack size
ptxas info    : Compile time = 735.659 ms
  """

OPTION_LOG = "nvrtc: error: unrecognized option --bogus found\n "


def test_error_with_caret_column_and_token_end():
    parsed = parse_log(ERROR_LOG)
    (d,) = parsed.diagnostics
    assert d.path == "/work/main/samples/broken/error.cu"
    assert (d.line, d.severity, d.code) == (11, Severity.ERROR, None)
    assert d.message == 'identifier "idx" is undefined'
    # Caret at index 28 of the caret line: column 28 - 2 + 1 = 27, the `i` of `idx`.
    assert d.col == 27
    assert d.end_col == 30  # exclusive end of `idx`
    assert parsed.unparsed == []
    assert parsed.resources == []


def test_several_findings_warning_code_and_continuation_lines():
    parsed = parse_log(SEVERAL_LOG)
    got = [(d.line, d.col, d.severity, d.code) for d in parsed.diagnostics]
    assert got == [
        (8, 9, Severity.ERROR, None),
        (10, 1, Severity.ERROR, None),
        (9, 7, Severity.WARNING, "177-D"),
        (2, 34, Severity.ERROR, None),
    ]
    assert parsed.diagnostics[2].message == 'variable "z" was declared but never referenced'
    # The "detected during instantiation" line belongs to the finding before it.
    assert parsed.diagnostics[3].message.endswith(
        'detected during instantiation of "T twice(T) [with T=float]" at line 7'
    )
    assert parsed.unparsed == []


def test_catastrophic_error_is_an_error():
    (d,) = parse_log(CATASTROPHIC_LOG).diagnostics
    assert d.severity == Severity.ERROR
    assert (d.line, d.col) == (1, 20)
    assert d.message == 'cannot open source file "nope.cuh"'
    assert d.end_col == 0  # the caret is past the end of the line: no token to underline


def test_error_in_header_names_the_header():
    (d,) = parse_log(HEADER_LOG, default_path="/work/main/samples/broken/header_error.cu").diagnostics
    assert d.path == "/work/main/samples/broken/broken_header.cuh"
    assert (d.line, d.col, d.end_col) == (6, 12, 17)


def test_ptxas_resources_per_entry():
    parsed = parse_log(PTXAS_LOG, default_path="/tmp/t/spill.cu")
    tk, big = parsed.resources
    assert (tk.mangled, tk.arch, tk.registers, tk.stack_bytes, tk.spill_store_bytes) == (
        "_ZN2ns2tkILi4EEEvPf",
        "sm_90",
        10,
        0,
        0,
    )
    assert (big.registers, big.shared_bytes, big.const_bytes, big.barriers) == (32, 4096, 380, 1)
    assert (big.stack_bytes, big.spill_store_bytes, big.spill_load_bytes) == (1216, 1760, 2192)
    # The spill warning is a line-less ptxas finding, on the checked file.
    (w,) = parsed.diagnostics
    assert (w.source, w.severity, w.path, w.line) == ("ptxas", Severity.WARNING, "/tmp/t/spill.cu", 1)
    # Lines it has no use for are kept, not dropped.
    assert parsed.unparsed == [PTXAS_LOG.splitlines()[0]]


def test_option_error_is_reported_apart():
    parsed = parse_log(OPTION_LOG)
    assert parsed.option_errors == ["unrecognized option --bogus found"]
    assert parsed.diagnostics == [] and parsed.unparsed == []


def test_windows_style_and_relative_paths():
    log = 'C:\\src\\k.cu(3): warning #550-D: variable "t" was set but never used\r\n'
    (d,) = parse_log(log).diagnostics
    assert (d.path, d.line, d.code, d.severity) == ("C:\\src\\k.cu", 3, "550-D", Severity.WARNING)


def test_remark_is_information():
    (d,) = parse_log("k.cu(4): remark #20012-D: something to know\n").diagnostics
    assert d.severity == Severity.INFO and d.code == "20012-D"


def test_empty_and_nul_only_logs():
    for log in ("", "\x00", " \n \x00", "\n\n"):
        parsed = parse_log(log)
        assert parsed.diagnostics == [] and parsed.unparsed == [] and parsed.resources == []


def test_resource_lines_without_an_entry_are_not_attributed():
    parsed = parse_log("ptxas info    : Used 10 registers, used 0 barriers\n")
    assert parsed.resources == []
    assert parsed.unparsed == ["ptxas info    : Used 10 registers, used 0 barriers"]


# --- property: never raises, never drops -------------------------------------------------------

_LOG_SYNTAX = re.compile(
    r"\(\d+\): |^ptxas|^nvrtc|^Remark|^Compilation|errors? detected in the compilation|^\d+ errors?"
)


def _is_noise(line: str) -> bool:
    """A line no NVRTC log line looks like; starts with no whitespace so that it cannot be a
    source/caret pair or a continuation."""
    return bool(line.strip()) and not line[:1].isspace() and not _LOG_SYNTAX.search(line.strip())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_parse_log_never_raises_on_any_text(text):
    parsed = parse_log(text)
    assert isinstance(parsed.unparsed, list)
    lines = set(text.replace("\x00", "").splitlines())
    assert all(u in lines for u in parsed.unparsed)
    for d in parsed.diagnostics:
        assert d.line >= 0 and d.col >= 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(max_size=60), max_size=30),
    st.lists(st.sampled_from([ERROR_LOG, SEVERAL_LOG, CATASTROPHIC_LOG, HEADER_LOG, PTXAS_LOG]), max_size=4),
)
def test_every_unrecognised_line_is_kept(noise, real_logs):
    noise_lines = [ln for chunk in noise for ln in chunk.replace("\x00", "").splitlines() if _is_noise(ln)]
    # Interleave: noise, then each real log, then more noise.
    half = len(noise_lines) // 2
    parts = noise_lines[:half] + [log.replace("\x00", "") for log in real_logs] + noise_lines[half:]
    text = "\n".join(parts)
    parsed = parse_log(text)
    expected_findings = sum(len(parse_log(log).diagnostics) for log in real_logs)
    assert len(parsed.diagnostics) == expected_findings
    real_unparsed = [u for log in real_logs for u in parse_log(log).unparsed]
    assert sorted(parsed.unparsed) == sorted(noise_lines + real_unparsed)


# --- source names -----------------------------------------------------------------------------


def test_source_name_demangles_entry_symbols():
    cases = {
        "_Z4vaddPKfS0_Pfi": "vadd",
        "_ZN2ns3fooEv": "foo",
        "_ZNK2ns3fooEv": "foo",
        "_ZN5outer5inner6kernelEPf": "kernel",
        "_Z3addILi4EEvPf": "add",
        "_ZN2ns2tkILi4EEEvPf": "tk",
        "_Z11softmax_rowPKfPfii": "softmax_row",
        "scale": "scale",  # extern "C"
        "vector_add": "vector_add",
    }
    for mangled, name in cases.items():
        assert source_name(mangled) == name, mangled


@given(st.text(max_size=50))
def test_source_name_never_raises(text):
    assert isinstance(source_name(text), str)
    assert isinstance(source_name("_Z" + text), str)
    assert isinstance(source_name("_ZN" + text), str)


def test_source_name_survives_absurd_lengths():
    assert isinstance(source_name("_Z" + "1" * 6000), str)
    assert isinstance(source_name("_ZN" + "9" * 6000 + "E"), str)


# --- nvcc's log --------------------------------------------------------------------------------

NVCC_LOG = """\
/p/app.cu(6): error: identifier "undefined_thing" is undefined
  __attribute__((device)) inline float bad(float x) { return undefined_thing + x; }
                                                             ^

/p/app.cu(9): warning #20011-D: calling a __host__ function("h(float)") from a __host__ __device__ function("hd") is not allowed

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

nvcc warning : Support for offline compilation for architectures prior to '<compute/sm/lto>_75' is deprecated
/p/app.cu:3:10: fatal error: nope.cuh: No such file or directory
    3 | #include "nope.cuh"
      |          ^~~~~~~~~~
compilation terminated.
/p/app.cu: Assembler messages:
/p/app.cu:12: Error: bad register name `%eaxbogus'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN3ops5totalIfEEvPKT_PS1_i' for 'sm_90'
ptxas info    : Function properties for _ZN3ops5totalIfEEvPKT_PS1_i
    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
nvcc fatal   : Unknown option '-Xfoo'
"""


def test_nvcc_log_lines():
    real = {6: "__device__ inline float bad(float x) { return undefined_thing + x; }"}
    parsed = parse_log(NVCC_LOG, "/p/app.cu", line_text=lambda p, n: real.get(n))
    got = [(d.line, d.col, d.severity.label, d.code, d.source) for d in parsed.diagnostics]
    col = real[6].index("undefined_thing") + 1
    assert got == [
        (6, col, "error", None, "nvrtc"),
        (9, 1, "warning", "20011-D", "nvrtc"),
        (1, 1, "warning", None, "nvcc"),
        (3, 10, "error", None, "host compiler"),
        (12, 1, "error", None, "host compiler"),
    ]
    assert parsed.diagnostics[0].end_col == col + len("undefined_thing")
    assert parsed.option_errors == ["Unknown option '-Xfoo'"]
    (r,) = parsed.resources
    assert (r.registers, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes) == (10, 16, 4, 8)
    assert parsed.unparsed == []


def test_caret_without_the_real_line_keeps_nvccs_column():
    parsed = parse_log(NVCC_LOG, "/p/app.cu")
    shown = NVCC_LOG.splitlines()[1][2:]
    assert parsed.diagnostics[0].col == shown.index("undefined_thing") + 1
