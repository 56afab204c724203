"""A host-entry spec end to end through the real server and the CLI, on the fake GPU: the launcher
is built as a shared library, called by the worker, and its figures appear in hover and a code
lens on the entry's line, and in `--check`'s output."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from conftest import REPO, diagnostics, open_file, server_env, start
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernel_lsp.compile import find_toolchain

pytestmark = pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing")

LAUNCHER = """#include <cstdlib>
// A launcher on host memory: the fake GPU's buffers are host arrays.
extern "C" void saxpy(const float* x, const float* y, float* out, size_t n, float alpha) {
    for (size_t i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];
}
"""
SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(
    entry="saxpy",
    sizes=[{"n": 1000}],
    args={"x": In("float32"), "y": In("float32"), "out": Out("float32"), "n": Scalar("uint64"),
          "alpha": Scalar("float32", value=2.0)},
    reference=lambda x, y, alpha: {"out": alpha * x + y},
)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "saxpy.cu").write_text(LAUNCHER)
    (tmp_path / "saxpy.spec.py").write_text(SPEC)
    return tmp_path


# The server and the CLI on the fake GPU, injected by the tests' launcher (kernel-lsp reads no
# setting that selects it).
ON_FAKE_GPU = str(REPO / "tests" / "kernel_lsp_on_fake_gpu.py")


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, ON_FAKE_GPU],
        server_env=server_env(),
    )
)
async def fake_gpu(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_hover_and_lens_on_a_host_entry(fake_gpu: LanguageClient, project: Path):
    await start(fake_gpu, project, options={"arch": ["sm_90"], "gpu": {"enabled": True}})
    u = open_file(fake_gpu, project / "saxpy.cu")
    await diagnostics(fake_gpu, u)
    line = 2  # 0-based line of `extern "C" void saxpy(`
    character = LAUNCHER.splitlines()[line].index("saxpy") + 1
    value = ""
    for _ in range(300):
        hover = await fake_gpu.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=u),
                position=types.Position(line=line, character=character),
            )
        )
        value = hover.contents.value if hover else ""
        if "verified on" in value:
            break
        await asyncio.sleep(0.1)
    assert "host entry" in value and "verified on 3 case(s)" in value, value
    lenses = await fake_gpu.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    titles = [lens.command.title for lens in lenses if lens.range.start.line == line]
    assert titles and titles[0].endswith("Fake") and " us · " in titles[0], [
        lens.command.title for lens in lenses
    ]


def test_check_cli_verifies_a_host_entry(project: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, ON_FAKE_GPU, "check", "-v", "--arch", "sm_90", str(project / "saxpy.cu")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=project,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "saxpy" in proc.stdout and "verified" in proc.stdout, proc.stdout
