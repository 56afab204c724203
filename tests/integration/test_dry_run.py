"""The CPU dry run: what `--check --no-gpu` (and the server without a GPU) finds in a spec that
could otherwise only fail on a GPU, each at its line in the spec file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_lsp import check as check_module
from kernel_lsp.check import spec_findings
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity
from kernel_lsp.skeleton import spec_skeleton
from kernel_lsp.source import find_kernels, parse_directives
from kernel_lsp.spec import load_specs
from kernel_lsp.spec.dry_run import dry_run

VADD = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

SPEC = """\
import numpy as np

from kernel_lsp.spec import In, Out, Scalar, Spec


def reference(a, b):
    return {"c": a + b}


SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 10}, {"n": 1000}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=reference,
)
"""


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def dry(tmp_path: Path, spec_text: str, source: str = VADD) -> list:
    (tmp_path / "vadd.cu").write_text(source)
    (tmp_path / "vadd.spec.py").write_text(spec_text)
    return spec_findings(str(tmp_path / "vadd.cu"), source)


def test_a_good_spec_passes(tmp_path):
    assert dry(tmp_path, SPEC) == []


def test_the_skeleton_as_generated_fails_at_its_reference(tmp_path):
    source = VADD.replace("// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256\n", "")
    text = spec_skeleton(find_kernels(source)[0], parse_directives(source), source)
    found = [d for d in dry(tmp_path, text, source) if d.code == "spec-dry-run"]
    (d,) = found
    assert d.severity is Severity.ERROR
    assert "the reference is not written yet: it raises NotImplementedError" in d.message
    assert d.line == line_of(text, "raise NotImplementedError")


def test_an_index_error_at_the_edge_sizes_is_found_at_its_line(tmp_path):
    # Right for n >= 2 (the spec's own sizes); "every size 1" is an edge case it forgets.
    text = SPEC.replace('return {"c": a + b}', 'return {"c": a + b + 0 * a[1]}')
    (d,) = dry(tmp_path, text)
    assert d.line == line_of(text, "a[1]")
    assert "case n=1 (an edge size): the reference raised IndexError" in d.message
    assert "sizes_valid" in d.message and "edge_sizes" in d.message


def test_a_reference_returning_another_name_is_found_at_the_reference(tmp_path):
    text = SPEC.replace('return {"c": a + b}', 'return {"out": a + b}')
    (d,) = dry(tmp_path, text)
    assert d.line == line_of(text, "def reference")
    assert "reference returned no `c` (it returned out)" in d.message


def test_a_transposed_or_mistyped_output_is_found(tmp_path):
    matrix = SPEC.replace('sizes=[{"n": 10}, {"n": 1000}]', 'sizes=[{"n": 10, "m": 3}]').replace(
        'In("float32"), "b"', 'In("float32", shape="(n, m)"), "b"'
    )
    matrix = matrix.replace('"b": In("float32")', '"b": In("float32", shape="(n, m)")')
    matrix = matrix.replace('"c": Out("float32")', '"c": Out("float32", shape="(n, m)")')
    assert dry(tmp_path, matrix) == []
    (d,) = dry(tmp_path, matrix.replace("a + b}", "(a + b).T}"))
    assert "reference output `c` has shape (3, 10), the buffer (10, 3)" in d.message
    (d,) = dry(tmp_path, SPEC.replace("a + b}", "a + 1j * b}"))
    assert "reference output `c` is an array of complex" in d.message


def test_an_integer_output_with_fractions_is_found(tmp_path):
    ints = SPEC.replace('"c": Out("float32")', '"c": Out("int32")').replace("a + b}", "np.rint(a + b)}")
    path = tmp_path / "ints.spec.py"
    path.write_text(ints)
    assert dry_run(load_specs(str(path)).specs[0]) == []
    path.write_text(ints.replace("np.rint(a + b)", "a + b"))
    (d,) = dry_run(load_specs(str(path)).specs[0])
    assert "reference output `c` is int32, but the reference gives" in d.message and "np.rint" in d.message


def test_a_distribution_that_fails_is_found_at_its_line(tmp_path):
    text = SPEC.replace(
        '"a": In("float32")',
        '"a": In("float32", dist=lambda rng, shape: rng.random(shape) if shape[0] > 1 else {}[0])',
    )
    (d,) = dry(tmp_path, text)
    assert d.line == line_of(text, "dist=lambda")
    assert "case n=1 (an edge size): drawing the inputs raised KeyError" in d.message
    wrong_shape = SPEC.replace(
        '"a": In("float32")', '"a": In("float32", dist=lambda rng, shape: rng.random(3))'
    )
    (d,) = dry(tmp_path, wrong_shape)
    assert d.line == line_of(wrong_shape, "dist=lambda")
    assert "`a`: distribution callable returned shape (3,), expected (10,)" in d.message


def test_only_small_cases_run(tmp_path):
    big = SPEC.replace('sizes=[{"n": 10}, {"n": 1000}]', 'sizes=[{"n": 1 << 26}], edge_sizes=False').replace(
        'return {"c": a + b}', "raise RuntimeError('too big to run')"
    )
    (d,) = dry(tmp_path, big)
    assert d.severity is Severity.INFO and "not dry-run on the CPU" in d.message and "n=67108864" in d.message
    # With the edge sizes it runs those (small) and finds the problem there.
    (d,) = dry(tmp_path, big.replace(", edge_sizes=False", ""))
    assert "case n=1 (an edge size): the reference raised RuntimeError" in d.message


def test_a_template_named_as_written_matches_its_unsigned_instance(tmp_path):
    source = textwrap.dedent(
        """\
        // kernel-lsp: launch k grid=cdiv(n, 256) block=256
        template <unsigned BLOCK>
        __global__ void k(const float* a, const float* b, float* c, int n)
        {
            int i = blockIdx.x * BLOCK + threadIdx.x;
            if (i < n) c[i] = a[i] + b[i];
        }
        template __global__ void k<256u>(const float*, const float*, float*, int);
        """
    )
    cu = tmp_path / "vadd.cu"
    cu.write_text(source)
    settings = Settings()
    for name, expected in (("k<256>", None), ("k<256u>", None), ("k<128>", "the file instantiates k<256>")):
        (tmp_path / "vadd.spec.py").write_text(SPEC.replace('kernel="vadd"', f'kernel="{name}"'))
        found = check_module.check_path(str(cu), settings).diagnostics
        spec_errors = [d for d in found if d.path.endswith(".spec.py") and d.severity is Severity.ERROR]
        if expected is None:
            assert spec_errors == [], (name, spec_errors)
        else:
            (d,) = spec_errors
            assert expected in d.message and 'kernel="k<256>"' in d.message, d.message
            assert d.line == line_of(SPEC, "SPEC = Spec(")


def test_the_dry_run_follows_the_spec_gate(tmp_path):
    """The dry run runs the reference: only where specs may run (specs.run, --specs, CI)."""
    marker = tmp_path / "reference-ran"
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(
        SPEC.replace(
            'return {"c": a + b}', f'open({str(marker)!r}, "w").close()\n    return {{"out": a + b}}'
        )
    )
    found = check_module.check_path(str(tmp_path / "vadd.cu"), Settings(specs_run="never")).diagnostics
    assert not marker.exists() and not any(d.code == "spec-dry-run" for d in found)
    out = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", "--specs", "static", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert not marker.exists() and "dry run" not in out.stdout, out.stdout
    found = check_module.check_path(str(tmp_path / "vadd.cu"), Settings()).diagnostics
    assert marker.exists() and any(d.code == "spec-dry-run" for d in found)


def test_the_skeletons_guesses_are_warnings_until_checked(tmp_path):
    # y's extent (indexed by idx's values) and flag (not a size) are guesses.
    opaque = "__global__ void gather(const float* x, const int* idx, float* y, int n, int flag) { if (flag) y[idx[0]] = x[n]; }\n"
    text = spec_skeleton(find_kernels(opaque)[0], parse_directives(opaque), opaque)
    path = tmp_path / "g.spec.py"
    path.write_text(text)
    todos = [d for d in load_specs(str(path)).diagnostics if d.code == "spec-todo"]
    assert todos and all(d.severity is Severity.WARNING for d in todos)
    assert {d.line for d in todos} == {line_of(text, f'"{n}":') for n in ("y", "flag")}
    path.write_text(text.replace("# TODO(kernel-lsp)", "#"))
    assert not [d for d in load_specs(str(path)).diagnostics if d.code == "spec-todo"]


def test_csr_with_sizes_passes_where_the_shape_only_form_fails_at_the_edges(tmp_path):
    csr = textwrap.dedent(
        """\
        import numpy as np
        from kernel_lsp.spec import In, Out, Spec

        def offsets(rng, rows, nnz):
            return np.concatenate([[0], np.sort(rng.integers(0, nnz + 1, rows - 1)), [nnz]])

        def reference(row_ptr, col_idx, x, rows):
            row_of = np.repeat(np.arange(rows), np.diff(row_ptr))
            return {"y": np.bincount(row_of, weights=x[col_idx], minlength=rows)}

        SPEC = Spec(
            kernel="spmv",
            sizes=[{"rows": 50, "cols": 20, "nnz": 300}],
            args={
                "row_ptr": In("int32", shape="rows + 1", dist=offsets),
                "col_idx": In("int32", shape="nnz", dist=lambda rng, shape, cols: rng.integers(0, cols, shape)),
                "x": In("float32", shape="cols"),
                "y": Out("float32", shape="rows"),
            },
            reference=reference,
        )
        """
    )
    path = tmp_path / "csr.spec.py"
    path.write_text(csr)
    assert dry_run(load_specs(str(path)).specs[0]) == []
    # The same spec with offsets drawn from the shape alone (nnz fixed at 300) reads past x
    # at the edge sizes: found on the CPU, at the reference.
    fixed = csr.replace("np.sort(rng.integers(0, nnz + 1, rows - 1)), [nnz]", "np.full(rows - 1, 300), [300]")
    fixed = fixed.replace("rng.integers(0, cols, shape)", "rng.integers(0, 20, shape)")
    path.write_text(fixed)
    (d,) = dry_run(load_specs(str(path)).specs[0])
    assert "an edge size" in d.message and "IndexError" in d.message


@pytest.mark.parametrize("spec_file", sorted(str(p) for p in Path("samples").rglob("*.spec.py")))
def test_every_sample_spec_passes_its_dry_run(spec_file):
    loaded = load_specs(spec_file)
    assert loaded.ok, loaded.diagnostics
    for spec in loaded.specs:
        assert dry_run(spec) == [], spec_file


def test_two_buffers_where_the_launcher_passes_one_is_an_error(tmp_path):
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "spec_corpus" / "llmc"
    source = (
        (corpus / "rmsnorm.cu")
        .read_text()
        .replace('#include "common.h"', "#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))")
    )
    truth = (corpus / "rmsnorm.spec.py").read_text()
    (tmp_path / "rmsnorm.cu").write_text(source)
    (tmp_path / "rmsnorm.spec.py").write_text(truth)
    assert spec_findings(str(tmp_path / "rmsnorm.cu"), source) == []
    wrong = truth.replace('"d_rms": Alias("rms")', '"d_rms": In("float32", shape="N")')
    (tmp_path / "rmsnorm.spec.py").write_text(wrong)
    (d,) = spec_findings(str(tmp_path / "rmsnorm.cu"), source)
    assert d.line == line_of(wrong, '"d_rms":') and d.severity is Severity.ERROR
    assert "`d_rms` and `rms` are one buffer: `rmsnorm_forward` passes the same variable as both" in d.message
    assert 'declare "d_rms": Alias("rms")' in d.message


COUNTS_ITS_RUNS = SPEC.replace(
    "def reference(a, b):\n",
    "def reference(a, b):\n    with open(__file__ + '.runs', 'a') as f:\n        f.write('x')\n",
)
assert "runs" in COUNTS_ITS_RUNS


def test_the_dry_run_is_run_again_only_when_its_spec_or_a_module_beside_it_changes(tmp_path):
    """A save of the kernel file does not run the spec's reference again (it depends on the
    spec alone); an edit of the spec, or of a Python file beside it, does; and a finding it
    made is reported at every save, not only the first."""
    runs = tmp_path / "vadd.spec.py.runs"

    def count() -> int:
        return len(runs.read_text()) if runs.exists() else 0

    assert dry(tmp_path, COUNTS_ITS_RUNS) == []
    first = count()
    assert first > 0
    assert dry(tmp_path, COUNTS_ITS_RUNS, VADD + "// saved again\n") == []
    assert count() == first  # the kernel file changed, not the spec
    (tmp_path / "helpers.py").write_text("K = 1\n")
    assert dry(tmp_path, COUNTS_ITS_RUNS) == []
    assert count() == 2 * first  # a module the spec could import appeared beside it
    edited = COUNTS_ITS_RUNS + "\n# edited\n"
    source = VADD + "// again\n"
    (tmp_path / "vadd.cu").write_text(source)
    assert spec_findings(str(tmp_path / "vadd.cu"), source, spec_text=edited) == []
    assert count() == 3 * first  # the editor's unsaved spec text is another spec
    broken = COUNTS_ITS_RUNS.replace('return {"c": a + b}', 'return {"d": a + b}')
    for version in range(2):
        found = dry(tmp_path, broken, VADD + f"// {version}\n")
        assert found and found[0].severity is Severity.ERROR, found
