"""The nvcc backend on host+device files written like real projects (tests/fixtures/real_projects):
findings equal bare nvcc's own, line for line; clean files give every kernel's resources under its
source name; the editor's text is compiled without writing into the user's folder; a missing host
compiler, a hanging or crashing nvcc and a rejected flag are each one clear diagnostic."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from kernel_lsp.cli import main
from kernel_lsp.compile import CompileOptions, choose_backend, compile_source, find_toolchain
from kernel_lsp.compile import nvcc as nvcc_backend
from kernel_lsp.model import NOT_CHECKED_IN_TIME, Severity

REAL = Path(__file__).parents[1] / "fixtures" / "real_projects"
TOOLCHAIN = find_toolchain()
pytestmark = [
    pytest.mark.slow,  # the slow tier (many nvcc compiles): python -m pytest -m slow
    pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}"),
]

CLEAN = [
    "cuda_samples/vectorAdd.cu",
    "cuda_samples/profiledVectorAdd.cu",  # cuda_profiler_api.h: the nvidia-cuda-profiler-api wheel
    "llmc/layernorm.cu",
    "vllm_csrc/activation_kernels.cu",
]
BROKEN = [
    "broken/host_error.cu",
    "broken/missing_include.cu",
    "broken/warning_20011.cu",
    "broken/header_error.cu",
]

# Written independently of kernel_lsp's parser: the two formats nvcc prints findings in.
_FRONT_END = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<sev>error|warning)\b")
_PREPROCESSOR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):\d+: (?P<sev>fatal error|error|warning)\b")


def bare_nvcc_findings(path: Path, tmp_path: Path) -> list[tuple[str, int, str]]:
    assert TOOLCHAIN.nvcc
    out = subprocess.run(
        [TOOLCHAIN.nvcc, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "bare.cubin"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = []
    for line in (out.stdout + out.stderr).splitlines():
        m = _FRONT_END.match(line) or _PREPROCESSOR.match(line)
        if m:
            sev = "warning" if m.group("sev") == "warning" else "error"
            found.append((os.path.abspath(m.group("path")), int(m.group("line")), sev))
    return found


def our_findings(path: Path, **options) -> list[tuple[str, int, str]]:
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90", **options))
    assert result.compiler == "nvcc"
    # Leave out kernel-lsp's own notes and the copy of a header's finding at its #include line.
    return [
        (os.path.abspath(d.path), d.line, d.severity.label)
        for d in result.diagnostics
        if d.source != "kernel-lsp" and not d.related
    ]


@pytest.mark.parametrize("name", CLEAN + BROKEN)
def test_findings_equal_bare_nvcc_line_for_line(name, tmp_path):
    path = REAL / name
    bare = bare_nvcc_findings(path, tmp_path)
    assert our_findings(path) == bare
    assert (name in CLEAN) == (bare == [])


def test_columns_point_at_the_token_in_the_real_source():
    # nvcc shows preprocessed lines (`__device__` as `__attribute__((device))`): the caret's column
    # is re-anchored on the file's own line.
    path = REAL / "broken" / "header_error.cu"
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    header = REAL / "broken" / "helpers_with_error.cuh"
    (in_header,) = [d for d in result.diagnostics if d.path.endswith("helpers_with_error.cuh")]
    real_line = header.read_text().splitlines()[in_header.line - 1]
    assert in_header.col == real_line.index("one_point_zero") + 1
    assert in_header.end_col == in_header.col + len("one_point_zero")
    (at_include,) = [d for d in result.diagnostics if d.related]
    assert (at_include.path, at_include.line, at_include.source) == (str(path), 3, "nvcc")

    host = REAL / "broken" / "host_error.cu"
    (d,) = compile_source(host.read_text(), str(host), CompileOptions(arch="sm_90")).diagnostics
    assert (d.line, d.col, d.severity, d.source) == (15, 18, Severity.ERROR, "nvcc")
    assert d.message == 'identifier "missing_count" is undefined'


def test_warning_number_is_the_code():
    path = REAL / "broken" / "warning_20011.cu"
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    assert result.ok
    (d,) = result.diagnostics
    assert (d.line, d.severity, d.code) == (6, Severity.WARNING, "20011-D")


def test_missing_include_says_where_it_looked():
    path = REAL / "broken" / "missing_include.cu"
    (d,) = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90")).diagnostics
    assert (d.line, d.col, d.severity) == (3, 10, Severity.ERROR)
    assert "does_not_exist.cuh" in d.message and "searched:" in d.message


EXPECTED_KERNELS = {
    "cuda_samples/vectorAdd.cu": {("vectorAdd", 6)},
    "cuda_samples/profiledVectorAdd.cu": {("vectorAdd", 7)},
    "llmc/layernorm.cu": {
        ("layernorm_forward_kernel<float>", 10),
        ("layernorm_forward_kernel<double>", 10),
        ("total<float>", 23),
        ("total<Pair>", 23),
    },
    "vllm_csrc/activation_kernels.cu": {
        ("silu_and_mul_kernel<float, 1>", 13),
        ("silu_and_mul_kernel<double, 4>", 13),
        ("relu(float*, int)", 24),
        ("relu(double*, int)", 29),
    },
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean_files_give_every_kernel_under_its_source_name(name):
    path = REAL / name
    result = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    assert result.ok and result.diagnostics == [] and result.cubin
    assert {(k.name, k.line) for k in result.kernels} == EXPECTED_KERNELS[name]
    assert all(k.registers > 0 and k.mangled.startswith("_Z") for k in result.kernels)


def test_check_exits_0_on_clean_host_device_files(capsys):
    code = main(["check", "-v", "--arch", "sm_90", *(str(REAL / n) for n in CLEAN)])
    out = capsys.readouterr().out
    assert code == 0, out
    # Reports show a kernel with its namespace (vLLM's are in `vllm`).
    namespace = {"vllm_csrc/activation_kernels.cu": "vllm::"}
    for name, kernels in EXPECTED_KERNELS.items():
        for kernel, _ in kernels:
            assert (
                f"{os.path.relpath(REAL / name)}: kernel {namespace.get(name, '')}{kernel} [sm_90]: " in out
            )


def test_check_json_keeps_mangled_and_function(capsys):
    import json

    main(["--check", "--arch", "sm_90", "--format", "json", str(REAL / "llmc" / "layernorm.cu")])
    data = json.loads(capsys.readouterr().out)
    kernels = data["files"][0]["kernels"]
    by_name = {k["name"]: k for k in kernels}
    assert by_name["total<Pair>"]["function"] == "total"
    assert by_name["total<Pair>"]["mangled"] == "_Z5totalI4PairEvPKT_Pfi"


def test_unsaved_text_is_compiled_and_nothing_is_written_beside_it(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "helpers.cuh").write_text(
        "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n"
    )
    on_disk = '#include "helpers.cuh"\n__global__ void k(float* x) { x[0] = twice(x[0]); }\nint main() {}\n'
    (folder / "app.cu").write_text(on_disk)
    before = sorted(os.listdir(folder))
    # The editor's text differs from the disk: an error on line 3 that the disk file lacks.
    text = on_disk.replace("int main() {}", "int main() {\n  return twice_host;\n}")
    result = compile_source(text, str(folder / "app.cu"), CompileOptions(arch="sm_90"))
    (d,) = result.diagnostics
    assert (d.path, d.line, d.col) == (str(folder / "app.cu"), 4, 10)
    assert sorted(os.listdir(folder)) == before
    # The quoted include found the neighbour (no error about it), and the header is known.
    assert str(folder / "helpers.cuh") in result.includes


def test_unchanged_text_is_served_from_the_cache():
    path = REAL / "cuda_samples" / "vectorAdd.cu"
    first = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    again = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    assert again.cached and [k.name for k in again.kernels] == [k.name for k in first.kernels]


def test_auto_sends_device_only_text_to_nvrtc_and_nvcc_only_options_to_nvcc():
    device_only = "__global__ void k(float* x) { x[0] = 1; }\n"
    assert choose_backend(device_only, CompileOptions()) == "nvrtc"
    assert choose_backend(device_only, CompileOptions(relaxed_constexpr=True)) == "nvcc"
    assert choose_backend(device_only, CompileOptions(extended_lambda=True)) == "nvcc"
    assert choose_backend("#include <torch/extension.h>\n" + device_only, CompileOptions()) == "nvcc"
    assert choose_backend(device_only, CompileOptions(compiler="nvcc")) == "nvcc"
    host = (REAL / "cuda_samples" / "vectorAdd.cu").read_text()
    assert choose_backend(host, CompileOptions()) == "nvcc"
    assert choose_backend(host, CompileOptions(compiler="nvrtc")) == "nvrtc"


def test_extended_lambda_file_compiles_with_nvcc():
    src = (
        "template <typename F> __global__ void apply(float* x, F f) { x[threadIdx.x] = f(x[threadIdx.x]); }\n"
        "void run(float* x) { apply<<<1, 32>>>(x, [] __device__ (float v) { return v * 2; }); }\n"
    )
    bad = compile_source(src, "/tmp/kernel_lsp_lambda.cu", CompileOptions(arch="sm_90"))
    assert any("extended-lambda" in d.message for d in bad.diagnostics)
    good = compile_source(
        src, "/tmp/kernel_lsp_lambda.cu", CompileOptions(arch="sm_90", extended_lambda=True)
    )
    assert good.ok and good.diagnostics == [], good.diagnostics
    assert len(good.kernels) == 1 and good.kernels[0].name.startswith("apply<")


def test_host_check_reports_the_host_toolchains_own_errors(tmp_path):
    path = tmp_path / "asm.cu"
    path.write_text(
        "__global__ void k(float* p) { p[0] = 1; }\n"
        "int main() {\n"
        "  int v = 0;\n"
        '  asm("movq %%rax, %0bogus" : "=r"(v));\n'
        "  return v;\n"
        "}\n"
    )
    # A build that makes only the device code (`nvcc -cubin`) never runs the host compiler.
    device_only = compile_source(
        path.read_text(), str(path), CompileOptions(arch="sm_90", build_output="cubin")
    )
    assert device_only.ok and device_only.diagnostics == []
    # A file with host code is compiled as its build compiles it, `nvcc -c`, by default.
    full = compile_source(path.read_text(), str(path), CompileOptions(arch="sm_90"))
    assert not full.ok
    (d,) = [d for d in full.diagnostics if d.severity == Severity.ERROR]
    assert (d.path, d.line, d.source) == (str(path), 4, "host compiler")
    # The device side still came through: resources and a CUBIN.
    assert [k.name for k in full.kernels] == ["k"]


# --- bad tools ---------------------------------------------------------------------------------

HOST_FILE = REAL / "cuda_samples" / "vectorAdd.cu"


def test_no_host_compiler_is_one_diagnostic_that_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++ here
    monkeypatch.delenv("CXX", raising=False)
    text = HOST_FILE.read_text()
    explicit = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90", compiler="nvcc"))
    (d,) = explicit.diagnostics
    assert (
        d.severity == Severity.ERROR and d.line == 1 and "g++" in d.message and "host compiler" in d.message
    )
    # auto: NVRTC's host-code finding, saying what is missing.
    auto = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90"))
    assert auto.compiler == "nvrtc"
    (d,) = auto.diagnostics
    assert d.code == "host-code" and "g++" in d.message


def test_no_nvcc_says_which_wheels_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr("kernel_lsp.compile.toolchain._wheel_nvcc", lambda: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    result = compile_source(HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_90"))
    (d,) = result.diagnostics
    assert d.code == "host-code" and "pip install nvidia-cuda-nvcc nvidia-cuda-crt" in d.message


def _fake_toolkit(tmp_path: Path, script: str) -> Path:
    bin_dir = tmp_path / "toolkit" / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + script)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return tmp_path / "toolkit"


def test_a_hanging_nvcc_is_killed_with_its_children(monkeypatch, tmp_path):
    pid_file = tmp_path / "child.pid"
    # The stand-in starts a child (as nvcc starts cicc) and waits forever.
    toolkit = _fake_toolkit(tmp_path, f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.setattr(nvcc_backend, "NVCC_TIMEOUT_S", 1.0)
    start = time.monotonic()
    result = compile_source(
        HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_90"), use_cache=False
    )
    assert time.monotonic() - start < 30
    # Not checked in time is no error: information naming the setting that raises the limit.
    (d,) = result.diagnostics
    assert d.severity == Severity.INFO and d.code == NOT_CHECKED_IN_TIME and result.timed_out
    assert d.message.startswith("not checked in time (1 s): nvcc") and "compileTimeoutSeconds" in d.message
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the hanging nvcc's child is still running")


def test_a_timeout_is_not_cached_and_the_setting_raises_the_limit(monkeypatch, tmp_path):
    marker = tmp_path / "slow-next"
    marker.touch()
    # Slow once (while the marker exists), then the real nvcc: same toolchain both times.
    script = f'if [ -e "{marker}" ]; then rm "{marker}"; sleep 30; fi\nexec "{TOOLCHAIN.nvcc}" "$@"\n'
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path, script)))
    text = HOST_FILE.read_text() + "// slow once\n"
    first = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90", timeout_s=1))
    assert first.timed_out and [d.code for d in first.diagnostics] == [NOT_CHECKED_IN_TIME]
    again = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90", timeout_s=120))
    assert not again.cached and again.ok and again.diagnostics == [] and again.kernels


def test_check_exit_code_ignores_a_timeout_unless_strict(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path, "sleep 30\n")))
    (tmp_path / "pyproject.toml").write_text("[tool.kernel-lsp]\ncompile-timeout-seconds = 1\n")
    target = tmp_path / "vectorAdd.cu"
    target.write_text(HOST_FILE.read_text())
    assert main(["--check", "--arch", "sm_90", "--compiler", "nvcc", str(target)]) == 0
    out = capsys.readouterr().out
    assert "info: not checked in time (1 s)" in out
    assert main(["--check", "--strict", "--arch", "sm_90", "--compiler", "nvcc", str(target)]) == 1


def test_a_crashing_nvcc_is_a_diagnostic(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path, "kill -SEGV $$\n")))
    result = compile_source(
        HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_90"), use_cache=False
    )
    (d,) = result.diagnostics
    assert d.severity == Severity.ERROR and "killed by signal 11" in d.message and not result.ok


def test_a_flag_nvcc_rejects_is_a_diagnostic_naming_it():
    result = compile_source(
        HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_90", extra=("-Xfoo",))
    )
    (d,) = result.diagnostics
    assert d.severity == Severity.ERROR and d.line == 1 and d.code == "option"
    assert "nvcc rejected the invocation: Unknown option '-Xfoo'" in d.message


def test_an_arch_nvcc_does_not_know_is_a_diagnostic():
    result = compile_source(HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_990"))
    (d,) = result.diagnostics
    assert "sm_990" in d.message and d.severity == Severity.ERROR


def test_a_header_alone_in_a_folder_with_a_space_and_an_odd_name(tmp_path):
    folder = tmp_path / "my kernels"
    folder.mkdir()
    header = folder / "odd'name v2.cuh"
    header.write_text(
        "#pragma once\n#include <cstdio>\n"
        'inline void hello() { printf("hi"); }\n'
        "__global__ void kk(float* p) { p[0] = oops; }\n"
    )
    result = compile_source(header.read_text(), str(header), CompileOptions(arch="sm_90"))
    assert result.compiler == "nvcc"
    # No "#pragma once in main file": a header checked alone is not a finding of its own.
    assert [(d.path, d.line, d.col, d.message) for d in result.diagnostics] == [
        (str(header), 4, 39, 'identifier "oops" is undefined')
    ]


def test_a_missing_cxx_is_named(monkeypatch):
    monkeypatch.setenv("CXX", "g++-does-not-exist")
    result = compile_source(
        HOST_FILE.read_text(), str(HOST_FILE), CompileOptions(arch="sm_90", compiler="nvcc")
    )
    (d,) = result.diagnostics
    assert "CXX=g++-does-not-exist was not found" in d.message


def test_a_crash_is_not_cached(monkeypatch, tmp_path):
    marker = tmp_path / "crash-next"
    marker.touch()
    # Crashes once (while the marker exists), then is the real nvcc: same toolchain both times.
    script = f'if [ -e "{marker}" ]; then rm "{marker}"; kill -SEGV $$; fi\nexec "{TOOLCHAIN.nvcc}" "$@"\n'
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path, script)))
    text = HOST_FILE.read_text() + "// crash once\n"
    first = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90"))
    assert "killed by signal" in first.diagnostics[0].message
    again = compile_source(text, str(HOST_FILE), CompileOptions(arch="sm_90"))
    assert not again.cached and again.ok and again.diagnostics == []


def test_neighbours_are_found_by_quoted_includes_only(tmp_path):
    folder = tmp_path / "plain_name"
    folder.mkdir()
    (folder / "nb.cuh").write_text("#pragma once\n__device__ inline float nb() { return 2; }\n")
    main_text = (
        '#include <cstdio>\n#include "nb.cuh"\n__global__ void k(float* p) { p[0] = nb(); }\nint main() {}\n'
    )
    quoted = compile_source(main_text, str(folder / "a.cu"), CompileOptions(arch="sm_90"))
    assert quoted.ok and quoted.diagnostics == [], quoted.diagnostics
    # Beside the file, `<nb.cuh>` is not found (no -I of the folder): nor is it here.
    angled = compile_source(
        main_text.replace('"nb.cuh"', "<nb.cuh>"), str(folder / "a.cu"), CompileOptions(arch="sm_90")
    )
    (d,) = angled.diagnostics
    assert (d.line, d.severity) == (2, Severity.ERROR) and "nb.cuh" in d.message
    # In a folder whose name a shell would split, the neighbour is still found (through -I).
    odd = tmp_path / "with space"
    odd.mkdir()
    (odd / "nb.cuh").write_text((folder / "nb.cuh").read_text())
    assert compile_source(main_text, str(odd / "a.cu"), CompileOptions(arch="sm_90")).diagnostics == []
