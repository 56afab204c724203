"""Shared fixtures and marker hooks. Other engineers append fixtures here; keep what exists."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
BROKEN = SAMPLES / "broken"


@functools.cache
def gpu_absent_reason() -> str | None:
    """None when an NVIDIA GPU and its driver answer, else why not (shown in the skip)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no NVIDIA GPU here (nvidia-smi not found)"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_reason = gpu_absent_reason()
    for item in items:
        if gpu_reason and "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"gpu test skipped: {gpu_reason}"))
        if "editor" in item.keywords and not shutil.which("nvim"):
            item.add_marker(
                pytest.mark.skip(reason="editor test skipped: `nvim` not on PATH (apt-get install -y neovim)")
            )


def pytest_runtest_logreport(report):
    """With KERNEL_LSP_TEST_TIMES=FILE, each test's time is appended as it ends (setup + call +
    teardown), so a run stopped at a time limit still says where its time went."""
    out = os.environ.get("KERNEL_LSP_TEST_TIMES")
    if out:
        with open(out, "a") as f:
            f.write(f"{report.duration:8.2f} {report.when} {report.outcome} {report.nodeid}\n")


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """Tests run kernel-lsp as a developer does: `CI` (set by CI services) makes `--check` read
    specs without running them; the tests of that behaviour set it themselves."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def broken_dir() -> Path:
    return BROKEN


def server_command() -> list[str]:
    """The real server as a subprocess, as an editor would start it."""
    return [sys.executable, "-m", "kernel_lsp"]


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # The e2e tests compile for sm_90 whatever machine they run on; no GPU work in the server.
    env.setdefault("PYTHONPATH", str(REPO))
    env.update(extra)
    return env
