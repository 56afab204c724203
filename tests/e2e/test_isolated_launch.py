"""The server started the way the VS Code extension starts it, `python -I -m kernel_lsp`, from a
workspace that ships its own `kernel_lsp/` package and an `optimizer.py` (issue 19, point 4): the
installed server runs, answers, compiles and runs the Optimize command's import, and no module of
the workspace ever runs. The working directory here is the workspace itself, the worst case (the
extension uses one outside it), and PYTHONPATH points at it too (isolated mode ignores both).

`-I` means the server is the installed one: in CI the editable install of the checkout (.ci/run),
in a developer's worktree whatever `kernel_lsp` the venv has installed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXIT_TIMEOUT_S, diagnostics, open_file
from fixture_sources import VADD
from lsprotocol import types
from pytest_lsp import make_test_lsp_client

ISOLATED_SERVER = [sys.executable, "-I", "-m", "kernel_lsp"]


def _marker_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'a').write(__name__ + ' ran\\n')\n"


@pytest.fixture
def shadowing_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """An ordinary ML repository that happens to have a `kernel_lsp/` folder and an `optimizer.py`,
    each of which leaves a marker when imported; and the marker's path."""
    workspace = tmp_path / "ml-repo"
    marker = tmp_path / "workspace-code-ran.txt"
    (workspace / "kernel_lsp").mkdir(parents=True)
    (workspace / "kernel_lsp" / "__init__.py").write_text(_marker_code(marker))
    (workspace / "kernel_lsp" / "__main__.py").write_text(_marker_code(marker) + "raise SystemExit(3)\n")
    (workspace / "optimizer.py").write_text(_marker_code(marker))
    (workspace / "vadd.cu").write_text(VADD)
    return workspace, marker


def _env(workspace: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(workspace)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_the_workspace_would_shadow_a_plain_python_m(shadowing_workspace, tmp_path):
    """The control: without -I, `python -m kernel_lsp` from the workspace runs the workspace's copy."""
    workspace, marker = shadowing_workspace
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "--version"],
        cwd=workspace,
        env=_env(workspace, tmp_path),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert "kernel_lsp ran" in marker.read_text()


async def test_the_isolated_server_runs_the_installed_code(shadowing_workspace, tmp_path):
    workspace, marker = shadowing_workspace
    client = make_test_lsp_client()
    await client.start_io(*ISOLATED_SERVER, env=_env(workspace, tmp_path), cwd=str(workspace))
    try:
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=workspace.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
                initialization_options={"arch": ["sm_90"], "gpu": {"enabled": False}},
            )
        )
        assert result.server_info is not None and result.server_info.name == "kernel-lsp"

        # A compile: the server's compile workers are started too, from the same folder.
        uri = open_file(client, workspace / "vadd.cu")
        found = await diagnostics(client, uri)
        assert not [d for d in found if d.severity == types.DiagnosticSeverity.Error], found

        # The Optimize command imports the optimizer first thing; a workspace `optimizer.py` on
        # sys.path made it fail with "'optimizer' is not a package". Bad arguments: nothing runs.
        answer = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernelLsp.optimize", arguments=[])
        )
        message = answer["message"] if isinstance(answer, dict) else answer.message
        assert "expects" in message, message
    finally:
        await asyncio.wait_for(client.shutdown_session(), EXIT_TIMEOUT_S)
    assert not marker.exists(), marker.read_text()
