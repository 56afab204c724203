"""samples/entries/, checked without a GPU: each file builds as the shared library its entry spec
runs (nvcc, no warnings), its spec fits the entry and passes the CPU dry run, each kernel's
launch is read from the launcher (occupancy in `--check`), and each reference agrees with an
independent computation written with Python's math on small inputs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kernel_lsp.check import spec_findings
from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.compile.shared_lib import compile_library
from kernel_lsp.model import Severity
from kernel_lsp.spec import load_specs, make_inputs, run_reference

ENTRIES = Path(__file__).resolve().parents[2] / "samples" / "entries"
SAMPLES = sorted(p.name.removesuffix(".cu") for p in ENTRIES.glob("*.cu"))
needs_nvcc = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")


def test_there_are_the_three_shapes():
    assert SAMPLES == ["l2_normalize_coop", "layernorm_fp32", "vector_add_bf16"]


@needs_nvcc
@pytest.mark.parametrize("name", SAMPLES)
def test_the_sample_builds_and_its_spec_fits_and_dry_runs(name, tmp_path):
    source = (ENTRIES / f"{name}.cu").read_text()
    options = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
    build = compile_library(source, str(ENTRIES / f"{name}.cu"), options)
    assert build.ok and build.library, [d.message for d in build.diagnostics]
    assert [d for d in build.diagnostics if d.severity >= Severity.WARNING] == []
    assert spec_findings(str(ENTRIES / f"{name}.cu"), source) == []


def _independent(name: str, inputs: dict, sizes: dict) -> dict:
    if name == "vector_add_bf16":
        return {"c": [float(a) + float(b) for a, b in zip(inputs["a"], inputs["b"], strict=True)]}
    if name == "layernorm_fp32":
        out = []
        for row in inputs["x"].tolist():
            mean = math.fsum(row) / len(row)
            var = math.fsum((v - mean) ** 2 for v in row) / len(row)
            rstd = 1 / math.sqrt(var + 1e-5)
            out.append(
                [
                    (v - mean) * rstd * g + b
                    for v, g, b in zip(row, inputs["gamma"], inputs["beta"], strict=True)
                ]
            )
        return {"y": out}
    x = inputs["x"].tolist()
    norm = math.sqrt(math.fsum(v * v for v in x) + 1e-12)
    return {"y": [v / norm for v in x]}


@pytest.mark.parametrize("name", SAMPLES)
def test_the_reference_agrees_with_an_independent_computation(name):
    spec = load_specs(str(ENTRIES / f"{name}.spec.py")).specs[0]
    sizes = min(spec.sizes, key=lambda s: math.prod(s.values()))
    sizes = {k: min(v, 64) for k, v in sizes.items()} if name != "layernorm_fp32" else {"rows": 3, "cols": 50}
    inputs = make_inputs(spec, sizes, seed=1, run=0)
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    got = run_reference(spec, sizes, inputs)
    for out, expected in _independent(name, inputs, sizes).items():
        # The reference arrives in the output dtype (float32): agree to its rounding.
        np.testing.assert_allclose(
            np.asarray(got[out], dtype=np.float64), np.asarray(expected), rtol=1e-6, atol=1e-6
        )
