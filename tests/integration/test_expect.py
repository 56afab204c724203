"""Expectation tests (rust-analyzer's `expect` style): for each CUDA file below, what a user sees is
kept as data in tests/fixtures/expect/<name>.expect: the `--check` text lines (findings and
resources) and the hover of each kernel. A change in what users see shows as a diff here.

After an intended change, rewrite the files and review the diff in git:

    KERNEL_LSP_UPDATE_EXPECT=1 python -m pytest tests/integration/test_expect.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_lsp.cli.formats import format_diagnostic, format_resources
from kernel_lsp.config import Settings
from kernel_lsp.server.requests.hover import resources_markdown
from kernel_lsp.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
EXPECT = REPO / "tests" / "fixtures" / "expect"
REAL = REPO / "tests" / "fixtures" / "real_projects"
CASES = {
    "error": REPO / "samples" / "broken" / "error.cu",
    "warning": REPO / "samples" / "broken" / "warning.cu",
    "header_error": REPO / "samples" / "broken" / "header_error.cu",
    "host_error": REAL / "broken" / "host_error.cu",
    "overloads_and_instances": REAL / "device_only" / "overloads_and_instances.cu",
    "namespaces": REAL / "device_only" / "namespaces.cu",
    "vector_add": REPO / "samples" / "vector_add" / "vector_add_fp32.cu",
    "cuda_samples_vectorAdd": REAL / "cuda_samples" / "vectorAdd.cu",
}


def seen_by_user(path: Path) -> str:
    """The `--check` lines and each kernel's hover, with paths relative to the repository."""
    cwd = os.getcwd()
    os.chdir(REPO)  # --check prints paths relative to where it runs
    try:
        check = Workspace.fixed(Settings(arch=("sm_90",))).analyze(str(path))
        lines = [
            format_diagnostic(d) for d in sorted(check.diagnostics, key=lambda d: (d.path, d.line, d.col))
        ]
        lines += [format_resources(k) for k in check.kernels]
    finally:
        os.chdir(cwd)
    compiler = check.results[0].compiler if check.results else "nvrtc"
    for name in dict.fromkeys(k.source_function for k in check.kernels):
        kernels = [k for k in check.kernels if k.source_function == name]
        lines += ["", f"hover {name}:", resources_markdown(name, kernels, compiler)]
    return "\n".join(lines).replace(str(REPO) + os.sep, "") + "\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_the_user_sees(name):
    got = seen_by_user(CASES[name])
    expected = EXPECT / f"{name}.expect"
    if os.environ.get("KERNEL_LSP_UPDATE_EXPECT"):
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(got)
    assert expected.exists(), f"no {expected.name}: run with KERNEL_LSP_UPDATE_EXPECT=1 and review it"
    assert got == expected.read_text(), (
        f"{name}: what the user sees changed; if intended, KERNEL_LSP_UPDATE_EXPECT=1 and review the diff"
    )
