"""Two phases for a file nvcc compiles, through the real server: the front end's findings are
published while the full compile still runs, and a newer text cancels the compile in flight
(its nvcc process group is killed). The server's nvcc here is a stand-in that makes the full
compile (`-cubin`, or `-c` for a file with host code) slow while a marker file exists and
otherwise runs the real nvcc."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from conftest import EXIT_TIMEOUT_S, change_and_save, diagnostics, open_file, server_env, start, stats
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernel_lsp.compile import find_toolchain

TOOLCHAIN = find_toolchain()
pytestmark = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

# A toolkit folder whose nvcc records the pid of each full compile and, while `slow` exists,
# sleeps before running the real one.
STAND_IN = Path(tempfile.mkdtemp(prefix="kernel-lsp-two-phase-"))
SLOW = STAND_IN / "slow"
FULL_PIDS = STAND_IN / "full.pids"
if TOOLCHAIN.nvcc:
    (STAND_IN / "bin").mkdir()
    nvcc = STAND_IN / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -cubin "*|*" -c "*)\n'
        f'  echo $$ >> "{FULL_PIDS}"\n'
        f'  if [ -e "{SLOW}" ]; then sleep 120; fi;;\n'
        "esac\n"
        f'"{TOOLCHAIN.nvcc}" "$@"\n'
    )
    nvcc.chmod(0o755)


@pytest.fixture(scope="module", autouse=True)
def _remove_stand_in():
    yield
    shutil.rmtree(STAND_IN, ignore_errors=True)


def _env() -> dict[str, str]:
    env = server_env()
    env["CUDA_HOME"] = str(STAND_IN)
    return env


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp"], server_env=_env())
)
async def slow_client(lsp_client: LanguageClient):
    yield
    SLOW.unlink(missing_ok=True)
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), EXIT_TIMEOUT_S)
    except RuntimeError:  # the test shut the server down itself
        pass
    except asyncio.TimeoutError:
        if lsp_client._server is not None:
            lsp_client._server.kill()
        pytest.fail(f"the server did not exit within {EXIT_TIMEOUT_S} s of shutdown/exit")


HOST_ERROR = """\
#include <cstdio>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
int main() {
  int n = 1024 + missing;
  scale<<<4, 256>>>(nullptr, 2.0f, n);
  return 0;
}
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_front_end_findings_come_first_and_an_edit_cancels_the_full_compile(slow_client, tmp_path):
    FULL_PIDS.unlink(missing_ok=True)
    SLOW.touch()
    await start(slow_client, tmp_path)
    path = tmp_path / "app.cu"
    path.write_text(HOST_ERROR)
    u = open_file(slow_client, path)
    (d,) = await diagnostics(slow_client, u, timeout=60)
    assert '"missing"' in d.message and d.range.start.line == 6
    # Published while the full compile of the same text still runs (it sleeps while SLOW exists).
    deadline = time.monotonic() + 30
    while not FULL_PIDS.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    (full_pid,) = [int(p) for p in FULL_PIDS.read_text().split()]
    assert _alive(full_pid)
    assert (await stats(slow_client))["firstLooks"] == 1

    # The fix arrives: the full compile of the old text is stopped, with its children.
    SLOW.unlink()
    slow_client.diagnostics.pop(u)
    change_and_save(slow_client, path, HOST_ERROR.replace(" + missing", ""), version=2)
    deadline = time.monotonic() + 10
    while _alive(full_pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(full_pid), "the outdated full compile still runs"
    assert await diagnostics(slow_client, u, lambda ds: len(ds) == 0, timeout=90) == []
    # The full result of the new text: resources on the kernel's line.
    lenses = await slow_client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert [lens.range.start.line for lens in lenses] == [1] and "regs" in lenses[0].command.title
    counters = await stats(slow_client)
    assert counters["cancels"] >= 1 and counters["inFlight"] == 0


async def test_a_shutdown_during_a_compile_ends_the_server_and_the_compile(slow_client, tmp_path):
    # A compile cancelled by the shutdown used to ask for a re-check, which started workers again
    # on a closed server: it never exited, and wrote errors until its stderr filled.
    FULL_PIDS.unlink(missing_ok=True)
    SLOW.touch()
    await start(slow_client, tmp_path)
    path = tmp_path / "app.cu"
    path.write_text(HOST_ERROR)
    u = open_file(slow_client, path)
    await diagnostics(slow_client, u, timeout=60)  # the first look
    deadline = time.monotonic() + 30
    while not FULL_PIDS.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    (full_pid,) = [int(p) for p in FULL_PIDS.read_text().split()]
    server = slow_client._server
    assert server is not None
    await asyncio.wait_for(slow_client.shutdown_session(), EXIT_TIMEOUT_S)
    await asyncio.wait_for(server.wait(), EXIT_TIMEOUT_S)
    deadline = time.monotonic() + 10
    while _alive(full_pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(full_pid), "the full compile outlived the server"
