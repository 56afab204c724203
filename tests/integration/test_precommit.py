"""The pre-commit hook, run by real `pre-commit` on a temporary git repository: it fails on a
broken .cu and passes on a clean one, only CUDA files reach it (`types: [cuda]`), the project's
excludes hold, and the README's snippet works as written.

The hook manifest's `language: python` makes pre-commit build a venv from PyPI (cuda-python and
the NVIDIA wheels: hundreds of MB), so the default test runs the manifest's hook as a local
`language: system` hook on this venv's `kernel-lsp`; the full `pre-commit try-repo` run is opt-in
with KERNEL_LSP_PRECOMMIT_NETWORK=1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent
CLEAN = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
BROKEN = "__global__ void k(float* x) { x[threadIdx.x] = nope; }\n"

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (BIN / "pre-commit").exists(), reason="git and pre-commit are needed"
)


def hook() -> dict:
    (h,) = yaml.safe_load(MANIFEST.read_text())
    return h


def test_manifest_shape():
    h = hook()
    assert h["id"] == "kernel-lsp"
    # Commits check compiles; GPU runs belong in CI.
    assert h["entry"] == "kernel-lsp check --no-gpu --force-exclude"
    # pre-commit installs kernel-lsp itself: nothing has to be on PATH (issue 25).
    assert h["language"] == "python"
    assert h["types"] == ["cuda"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(tmp_path: Path, config: str) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "test")
    (repo / ".pre-commit-config.yaml").write_text(config)
    (repo / "notes.txt").write_text("not CUDA: never passed to the hook\n")
    return repo


def run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(repo.parent / "pre-commit-home"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(BIN / "pre-commit"), *args], cwd=repo, capture_output=True, text=True, env=env, timeout=600
    )


def test_hook_fails_on_broken_and_passes_on_clean(tmp_path):
    h = hook()
    # The manifest's hook, as a local hook on this venv (no venv build, no network).
    entry = str(BIN / h["entry"].split()[0]) + " " + " ".join([*h["entry"].split()[1:], "--no-gpu"])
    config = (
        "repos:\n- repo: local\n  hooks:\n"
        f"  - id: {h['id']}\n    name: {h['name']}\n    entry: {entry}\n    language: system\n"
        f"    types: {h['types']}\n    require_serial: {str(h['require_serial']).lower()}\n"
    )
    repo = make_repo(tmp_path, config)
    (repo / "good.cu").write_text(CLEAN)
    git(repo, "add", "-A")
    ok = run(repo, "run", "--files", "good.cu", "notes.txt")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout

    (repo / "bad.cu").write_text(BROKEN)
    git(repo, "add", "-A")
    bad = run(repo, "run", "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout
    assert re.search(r'bad\.cu:1:\d+: error: identifier "nope" is undefined', bad.stdout), bad.stdout
    assert "notes.txt" not in bad.stdout

    # Fixing the file makes the commit hook pass.
    (repo / "bad.cu").write_text(CLEAN)
    git(repo, "add", "-A")
    assert run(repo, "run", "--all-files").returncode == 0


def readme_snippet() -> str:
    """The local hook's `.pre-commit-config.yaml` that docs/ci.md's pre-commit section shows, as
    written (the section's other snippet, the hook repository, needs the network: see the last
    test)."""
    section = (REPO / "docs" / "ci.md").read_text().split("## pre-commit", 1)[1].split("\n## ", 1)[0]
    (local,) = [b for b in re.findall(r"```yaml\n(.*?)```", section, re.S) if "repo: local" in b]
    return local


def test_the_readme_snippet_works_as_written_and_excludes_hold(tmp_path):
    repo = make_repo(tmp_path, readme_snippet())
    (repo / "pyproject.toml").write_text('[tool.kernel-lsp]\nexclude = ["legacy"]\n')
    (repo / "legacy").mkdir()
    (repo / "legacy" / "error.cu").write_text(BROKEN)  # excluded by the project: never checked
    (repo / "good.cu").write_text(CLEAN)
    git(repo, "add", "-A")
    ok = run(repo, "run", "--all-files")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout and "error.cu" not in ok.stdout
    # Only the excluded file changed: the hook has nothing to check, and passes.
    only = run(repo, "run", "--files", "legacy/error.cu")
    assert only.returncode == 0, only.stdout + only.stderr

    (repo / "bad.cu").write_text(BROKEN)
    git(repo, "add", "-A")
    bad = run(repo, "run", "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r'bad\.cu:1:\d+: error: identifier "nope" is undefined', bad.stdout), bad.stdout
    assert "legacy" not in bad.stdout


@pytest.mark.skipif(
    os.environ.get("KERNEL_LSP_PRECOMMIT_NETWORK") != "1",
    reason="builds the hook's venv from PyPI (hundreds of MB); set KERNEL_LSP_PRECOMMIT_NETWORK=1",
)
def test_try_repo_with_the_real_manifest(tmp_path):
    repo = make_repo(tmp_path, "repos: []\n")
    (repo / "bad.cu").write_text(BROKEN)
    git(repo, "add", "-A")
    bad = run(repo, "try-repo", str(REPO), "kernel-lsp", "--all-files")
    assert bad.returncode == 1 and "identifier" in bad.stdout, bad.stdout + bad.stderr
    (repo / "bad.cu").write_text(CLEAN)
    git(repo, "add", "-A")
    assert run(repo, "try-repo", str(REPO), "kernel-lsp", "--all-files").returncode == 0
