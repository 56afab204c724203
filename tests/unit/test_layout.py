"""The project brief's layout: the optimizer's source is the top-level optimizer/ folder, installed
as kernel_lsp.optimizer (setup.py), with no top-level `optimizer` import name; kernel_lsp/optimizer
links to it for a checkout on PYTHONPATH."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from setuptools import distutils

import kernel_lsp.optimizer

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_imports_the_optimizer_from_the_top_level_folder():
    link = REPO / "kernel_lsp" / "optimizer"
    assert link.is_symlink() and os.readlink(link) == "../optimizer"
    assert Path(kernel_lsp.optimizer.__file__).resolve() == REPO / "optimizer" / "__init__.py"
    assert importlib.util.find_spec("kernel_lsp.optimizer.prompts") is not None


def test_the_package_list_installs_every_optimizer_package_under_kernel_lsp(monkeypatch):
    monkeypatch.chdir(REPO)
    dist = distutils.core.run_setup("setup.py", stop_after="init")
    folders = {
        ".".join(("kernel_lsp", *p.parent.relative_to(REPO).parts))
        for p in (REPO / "optimizer").rglob("__init__.py")
    }
    assert folders <= set(dist.packages)
    assert "kernel_lsp.optimizer.proposers" in dist.packages and "kernel_lsp" in dist.packages
    # None found through the link (which a copy without links would lose), none top-level.
    assert not [p for p in dist.packages if not p.startswith("kernel_lsp")]
    assert dist.packages.count("kernel_lsp.optimizer") == 1
    assert dist.package_dir == {"kernel_lsp.optimizer": "optimizer"}
