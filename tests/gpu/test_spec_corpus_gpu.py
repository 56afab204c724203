"""Hand-written specs of the skeleton corpus (tests/fixtures/spec_corpus) verify on a GPU, launched
as their own host code launches them: the truth the skeleton is scored against is true. One file
per feature (a pipeline with a launcher temporary, an atomic accumulator the launcher zeroes, CSR
inputs drawn from the sizes, a 3-D buffer, a uint8 histogram, a 2-D transpose); measure=False keeps
it to verification."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "spec_corpus"
VERIFIED = (
    "bench/sum_two_pass.cu",
    "bench/dot_bf16.cu",
    "bench/spmv_csr.cu",
    "bench/stencil3d.cu",
    "cuda_samples/histogram.cu",
    "cuda_samples/transpose.cu",
)


@pytest.fixture(scope="module")
def gpu():
    with GpuSession(timing=TimingSettings(budget_s=0.05)) as session:
        assert session.available, session.reason
        yield session


@pytest.mark.parametrize("name", VERIFIED)
def test_a_corpus_spec_verifies(gpu, name):
    checks = check_file(gpu, str(CORPUS / name), measure=False)
    assert checks and all(c.ok for c in checks), [(c.kernel, c.status, c.message) for c in checks]
