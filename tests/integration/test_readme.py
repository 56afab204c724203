"""The README's commands and the documentation's snippets, as written: the two commands at the top
of the README (and CI's test command, the same), the install section's prerequisites; in
docs/cli.md the suppression example and the pyproject selection; in docs/ci.md the pre-commit hook
repository and the GitHub Actions workflow's `kernel-lsp check` line (run on broken files: it
writes the SARIF report the upload step names)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sarif_shape import sarif_problems

from kernel_lsp.config import settings_from_dict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
CLI_DOC = (REPO / "docs" / "cli.md").read_text()
CI_DOC = (REPO / "docs" / "ci.md").read_text()
BIN = Path(sys.executable).parent


def blocks(language: str, after: str = "", text: str = README) -> list[str]:
    """The ```language blocks of `text` (the README; after the heading `after`), as written."""
    text = text.split(after, 1)[1] if after else text
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def run_as_written(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A README command line, with this environment's `kernel-lsp` first on PATH."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(REPO))
    return subprocess.run(shlex.split(command), cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def test_the_two_commands_at_the_top_are_true():
    install_and_check, install_and_test = [ln.split("#")[0].strip() for ln in blocks("sh")[0].splitlines()]
    # The first works on a fresh Debian/Ubuntu, whose Python refuses `pip install` outside a venv.
    assert install_and_check == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && kernel-lsp check samples/"
    )
    assert (BIN / "kernel-lsp").exists(), "the project is installed (pip install -e .) in this environment"
    done = run_as_written(install_and_check.split("&&")[-1], REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    (summary,) = done.stdout.splitlines()  # a clean run: one line
    assert summary.startswith("checked ") and " 0 error(s)" in summary, summary
    # The second: the test extra exists and pytest finds the tests from the repository's root.
    install, test_command = install_and_test.split(" && ")
    assert install == 'pip install -e ".[test]"' and test_command == "python -m pytest -rs"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "pytest>=8" in project["project"]["optional-dependencies"]["test"]
    assert project["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    # CI runs the README's test command as written, then the slow tier.
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci and "python -m pytest -m slow -rs" in ci
    assert ci.index(test_command) < ci.index("python -m pytest -m slow -rs")


def test_the_install_section_lists_the_prerequisites_the_package_declares():
    section = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10" and "Python 3.10 or newer" in section
    assert "`g++`" in section and "GB" in section
    (commands,) = blocks("sh", "## Install")[:1]
    assert "pip install -e ." in commands and "kernel-lsp check samples/" in commands


def test_the_suppression_example_compiles_without_its_warning(tmp_path):
    (example,) = blocks("cuda", "## Choosing and suppressing findings", CLI_DOC)[:1]
    assert example.startswith("#pragma nv_diag_suppress 177")
    (tmp_path / "suppressed.cu").write_text(example)
    loud = "\n".join(ln for ln in example.splitlines() if not ln.startswith("#pragma"))
    (tmp_path / "loud.cu").write_text(loud + "\n")
    done = run_as_written(f"kernel-lsp check --no-gpu --arch sm_90 {tmp_path}", tmp_path)
    findings = done.stdout.splitlines()[:-1]
    assert len(findings) == 1 and findings[0].startswith("loud.cu:") and "[177-D]" in findings[0]


def test_the_selection_example_is_settings_the_cli_knows():
    (example,) = blocks("toml", "## Choosing and suppressing findings", CLI_DOC)[:1]
    table = tomllib.loads(example)["tool"]["kernel-lsp"]
    settings, problems = settings_from_dict(table)
    assert problems == [] and settings.ignore == ("177", "spill") and settings.select == ("ALL",)


def test_the_pre_commit_snippets_name_the_hook_the_repository_has():
    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    remote, local = (yaml.safe_load(b) for b in blocks("yaml", "## pre-commit", CI_DOC)[:2])
    (hook,) = remote["repos"][0]["hooks"]
    assert hook["id"] == manifest[0]["id"] and manifest[0]["language"] == "python"
    assert local["repos"][0]["hooks"][0]["entry"] == manifest[0]["entry"]  # the same command


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed")
def test_the_github_actions_workflow_runs_as_written(tmp_path, monkeypatch):
    (workflow,) = [yaml.safe_load(b) for b in blocks("yaml", "## GitHub Actions", CI_DOC) if "jobs:" in b][:1]
    assert workflow["permissions"]["security-events"] == "write"
    (job,) = workflow["jobs"].values()
    steps = job["steps"]
    (check,) = [s for s in steps if "kernel-lsp check" in s.get("run", "")]
    (upload,) = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert steps.index(upload) > steps.index(check) and upload["if"] == "always()"
    args = shlex.split(check["run"])
    report = args[args.index("--output-file") + 1]
    assert upload["with"]["sarif_file"] == report and "--format" in args and "sarif" in args
    # The step as written, in a checkout with a broken kernel and a broken header (CI is set there).
    project = tmp_path / "checkout"
    shutil.copytree(REPO / "samples" / "broken", project / "kernels")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.setenv("CI", "true")
    done = run_as_written(check["run"], project)
    assert done.returncode == 1, done.stdout + done.stderr  # errors: the job fails, upload still runs
    assert done.stdout == ""  # the report went to the file
    log = json.loads((project / report).read_text())
    assert sarif_problems(log) == []
    results = log["runs"][0]["results"]
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results)
    # Relative to the checkout (code scanning resolves them there); the header's typo at the
    # header, and at the #include of the file it breaks (SARIF lists an error under each file).
    assert uris == [
        "kernels/broken_header.cuh",
        "kernels/error.cu",
        "kernels/header_error.cu",
        "kernels/warning.cu",
    ], uris


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)  # `#pragma` in a code block is no heading
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", prose, re.M)}


def test_the_readme_is_short_and_every_link_of_it_and_the_docs_leads_somewhere():
    assert len(README.splitlines()) <= 150
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked.read_text()), f"{page.name}: {target}"
