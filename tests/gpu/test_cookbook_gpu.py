"""docs/specs.md's cookbook on a GPU: every example verifies (its kernels are right and its spec
describes them), and an example whose Alias is replaced by a buffer of its own fails, as the docs
say it does."""

from __future__ import annotations

import json

import pytest
from fixture_sources import cookbook, write_example

from kernel_lsp.cli import main

pytestmark = pytest.mark.gpu

EXAMPLES = cookbook()


def check_json(capsys, cu) -> tuple[int, dict]:
    code = main(["--check", "--format", "json", str(cu)])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)["files"][0]


@pytest.mark.parametrize("title", sorted(EXAMPLES))
def test_each_example_verifies_on_the_gpu(capsys, tmp_path, title):
    code, report = check_json(capsys, write_example(tmp_path, title, EXAMPLES))
    said = [g.get("message") for g in report["gpu"]] + [d["message"] for d in report["diagnostics"]]
    assert code == 0 and report["gpu"] and all(g["ok"] for g in report["gpu"]), said


def test_two_buffers_where_the_launcher_passes_one_fail(capsys, tmp_path):
    title = next(t for t in EXAMPLES if "two names" in t)
    cu_text, spec_text = EXAMPLES[title]
    wrong = {title: (cu_text, spec_text.replace('Alias("rms")', 'In("float32", shape="N")'))}
    code, report = check_json(capsys, write_example(tmp_path, title, wrong))
    assert code == 1 and not report["gpu"][0]["ok"] and "`out`" in report["gpu"][0]["message"], report
