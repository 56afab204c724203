"""The one lexer (kernel_lsp/lexer.py) against the compilers, over the repository's samples and
fixtures and over generated texts that are hard to lex (tests/c_text.py):

- comments: the text with the lexer's comments blanked preprocesses (g++ -E, the preprocessor
  nvcc runs) to what the text itself does, and has no comment left that g++ -C would keep;
- declarations: a probe that compiles only between two declarations (`namespace p {}`) compiles
  where the optimizer's splice says each kernel definition starts and ends;
- arguments: each kernel's parameters, as the lexer split them, are the function type the
  compiler gives the kernel (`static_cast<void (*)(T1, ..., Tn)>(&k)` compiles only then), and
  each `<<<>>>` launch passes as many arguments as its kernel takes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

from kernel_lsp.compile import CompileOptions, compile_source
from kernel_lsp.host_launch import parse_host
from kernel_lsp.lexer import COMMENTS, blank_comments_keep_strings, lex, split_top
from kernel_lsp.optimizer.extract import _definitions
from kernel_lsp.source import find_includes, find_kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from c_text import PARAMETER_TYPES, c_text, parameter_lists

REPO = Path(__file__).resolve().parents[2]
GXX = shutil.which("g++")
OPTIONS = CompileOptions(arch="sm_90")


def _corpus(root: str, suffixes: tuple[str, ...] = (".cu", ".cuh")) -> list[Path]:
    return sorted(p for p in (REPO / root).rglob("*") if p.suffix in suffixes)


def _preprocess(text: str, folder: Path, headers: list[str], keep_comments: bool = False) -> tuple[int, str]:
    """g++ -E of `text` as folder/main.cpp (its includes empty stubs), whitespace folded."""
    stubs = folder / "stubs"
    for name in headers:
        stub = stubs / name
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.touch()
    (folder / "main.cpp").write_text(text)
    cmd = [GXX, "-std=c++17", "-E", "-P", "-w", "-x", "c++", "-nostdinc", "-I", str(stubs), "main.cpp"]
    done = subprocess.run(cmd + (["-C"] if keep_comments else []), capture_output=True, text=True, cwd=folder)
    return done.returncode, " ".join(done.stdout.split())


def _comments_disagree(text: str, folder: Path) -> str | None:
    """Why the lexer's comments are not g++'s in `text` (None when they are, "skip" when g++
    refuses the text itself)."""
    headers = [i.target for i in find_includes(text) if not i.target.startswith("/")]
    status, original = _preprocess(text, folder, headers)
    if status or any(
        re.search(r"\\[ \t\f\v]*$", text[: t.start]) for t in lex(text).tokens if t.kind in COMMENTS
    ):
        # Blanked, a comment after a stray backslash (no C++ has one) would make a line splice.
        return "skip"
    blanked = blank_comments_keep_strings(text)
    status, without = _preprocess(blanked, folder, headers)
    if status or without != original:
        return "blanking changed what the preprocessor reads (blanked a non-comment)"
    status, kept = _preprocess(blanked, folder, headers, keep_comments=True)
    if status or kept != without:
        return "a comment is left in the blanked text"
    return None


@pytest.mark.skipif(GXX is None, reason="no g++ on PATH")
@pytest.mark.parametrize("root", ["samples", "tests/fixtures"])
def test_the_lexers_comments_are_the_compilers_over_the_corpus(root, tmp_path):
    wrong, read = [], 0
    for path in _corpus(root):
        why = _comments_disagree(path.read_text(errors="replace"), tmp_path)
        if why != "skip":
            read += 1
        if why not in (None, "skip"):
            wrong.append(f"{path.relative_to(REPO)}: {why}")
    assert wrong == []
    assert read >= 30


@pytest.mark.skipif(GXX is None, reason="no g++ on PATH")
@given(c_text())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_lexers_comments_are_the_compilers(text):
    with tempfile.TemporaryDirectory() as folder:
        why = _comments_disagree(text, Path(folder))
    assume(why != "skip")
    assert why is None, text


ARITY = "template <class... P> __host__ __device__ constexpr int kernel_lsp_arity(void (*)(P...)) { return sizeof...(P); }\n"


def _parameter_probe(kernel: str, parts: list[str], namespace: str = "", tag: str = "0") -> str:
    """Compiles only where each part is one parameter declaration (a function of its own takes
    it) and the parts, as many as they are, are the kernel's parameters."""
    parts = [p.split(" = ")[0] for p in parts]  # a function type takes no default argument
    own = "".join(f"__device__ void kernel_lsp_part_{tag}_{i}({p});\n" for i, p in enumerate(parts))
    name = f"::{namespace}::{kernel}" if namespace else f"::{kernel}"
    cast = f"static_cast<void (*)({', '.join(parts)})>(&{name})"
    probe = own + f'static_assert(kernel_lsp_arity({cast}) == {len(parts)}, "{kernel}");\n'
    return f"namespace {namespace} {{\n{probe}}}\n" if namespace else probe


def _probed(source: str) -> tuple[str, int]:
    """`source` with a namespace probe where each kernel definition starts and ends (as the
    optimizer's splice cuts it), and a parameter probe per plain kernel; and the probe count."""
    inserts = []
    for n, (start, end) in enumerate(sorted(_definitions(source).values())):
        inserts += [
            (start, f"namespace kernel_lsp_start_{n} {{}} "),
            (end, f" namespace kernel_lsp_end_{n} {{}}"),
        ]
    for at, text in sorted(inserts, reverse=True):
        source = source[:at] + text + source[at:]
    tail = [
        _parameter_probe(k.name, [f"{p.type} {p.name}" for p in k.params], k.namespace, str(n))
        for n, k in enumerate(find_kernels(source))
        if k.definition and not k.templated
    ]
    return source + "\n" + ARITY + "".join(tail), len(inserts) + len(tail)


def _launch_arity_errors(source: str) -> list[str]:
    """`<<<>>>` launches whose argument count is not their kernel's parameter count (a file the
    compiler accepted launches each kernel with as many arguments as it takes)."""
    kernels: dict[str, list] = {}
    for k in find_kernels(source):
        kernels.setdefault(k.name, []).append(k)
    out = []
    for launch in parse_host(source).launches:
        found = kernels.get(launch.kernel, [])
        if launch.kind != "<<<>>>" or launch.macro or len(found) != 1 or found[0].templated:
            continue
        if len(launch.arguments) != len(found[0].params):
            out.append(f"line {launch.line}: {len(launch.arguments)} arguments to {launch.kernel}")
    return out


@pytest.mark.slow
def test_the_lexers_declarations_and_arguments_are_the_compilers_over_the_corpus():
    """About 120 compiles (NVRTC, nvcc where the file has host code): two minutes on 2 cores."""
    wrong, probes = [], 0
    for path in _corpus("samples", (".cu",)) + _corpus("tests/fixtures", (".cu",)):
        source = path.read_text(errors="replace")
        text, count = _probed(source)
        if not count:
            continue
        result = compile_source(text, str(path), OPTIONS, use_cache=False)
        if not result.ok and not compile_source(source, str(path), OPTIONS, use_cache=False).ok:
            continue  # the file does not compile as it is (a fixture of a broken file)
        probes += count
        errors = [d.message for d in result.diagnostics if d.severity == "error"]
        wrong += [f"{path.relative_to(REPO)}: {e}" for e in errors + _launch_arity_errors(source)]
    assert wrong == []
    assert probes >= 200


@given(parameter_lists)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_parameter_list_is_split_as_the_compiler_reads_it(params):
    """Template arguments with commas and `>`, function pointers, arrays, default arguments that
    compare: the lexer's parts are the compiler's parameters."""
    joined = ", ".join(params)
    source = (
        PARAMETER_TYPES
        + ARITY
        + f"__global__ void k({joined}) {{}}\n"
        + _parameter_probe("k", split_top(joined) if params else [])
    )
    result = compile_source(source, "/tmp/kernel_lsp_params.cu", OPTIONS, use_cache=False)
    assert result.ok, (source, [d.message for d in result.diagnostics])
