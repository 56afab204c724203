"""Every example of docs/specs.md's cookbook works as written: its `.cu` compiles, its spec loads,
fits the kernels (arguments, dtypes, launch lines, template instances) and passes its dry run on
the CPU. tests/gpu/test_cookbook_gpu.py verifies the same examples on a GPU."""

from __future__ import annotations

import pytest
from fixture_sources import cookbook, write_example

from kernel_lsp.check import check_path
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

EXAMPLES = cookbook()


def test_the_cookbook_covers_what_users_need():
    titles = " ".join(EXAMPLES).lower()
    for topic in ("zeroed", "temporaries", "pipelines", "two names", "templates", "sparse", "3-d", "bf16"):
        assert topic in titles, topic


@pytest.mark.parametrize("title", sorted(EXAMPLES))
def test_each_example_compiles_fits_and_passes_its_dry_run(tmp_path, title):
    cu = write_example(tmp_path, title, EXAMPLES)
    found = check_path(str(cu), Settings())
    problems = [d for d in found.diagnostics if d.severity >= Severity.WARNING]
    assert found.checked and problems == [], [f"{d.path}:{d.line}: {d.message}" for d in problems]
    assert found.kernels, "it compiled to kernels"
