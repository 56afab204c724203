"""On a GPU: a kernel that compiles only with its project's flags (compile_commands.json) is
verified and timed by `kernel-lsp --check`, which hands the GPU compile the same flags."""

from __future__ import annotations

import json

import pytest
from fixture_sources import flags_project

from kernel_lsp.cli import main

pytestmark = pytest.mark.gpu


def test_a_kernel_needing_its_projects_flags_is_verified_and_timed(tmp_path, capsys):
    kernel = flags_project(tmp_path)
    code = main(["--check", "--format", "json", kernel])
    out = capsys.readouterr().out
    assert code == 0, out
    [checked] = [f for f in json.loads(out)["files"] if f["path"].endswith("vadd.cu")]
    [verdict] = checked["gpu"]
    assert verdict["ok"], verdict
    assert verdict["timings"], verdict
