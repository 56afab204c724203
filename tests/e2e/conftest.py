"""The real server as a subprocess (`python -m kernel_lsp`), driven by pytest-lsp."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"

# Deterministic on any machine: sm_90, no GPU work in the server.
BASE_OPTIONS: dict[str, Any] = {"arch": ["sm_90"], "gpu": {"enabled": False}}
EXIT_TIMEOUT_S = 15.0


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp"], server_env=server_env())
)
async def client(lsp_client: LanguageClient):
    # Each test initializes with the capabilities and options it needs (see `start`).
    yield
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), EXIT_TIMEOUT_S)
    except asyncio.TimeoutError:
        if lsp_client._server is not None:
            lsp_client._server.kill()
        pytest.fail(f"the server did not exit within {EXIT_TIMEOUT_S} s of shutdown/exit")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of samples/broken and vector_add the tests may edit."""
    shutil.copytree(SAMPLES / "broken", tmp_path / "broken")
    shutil.copytree(SAMPLES / "vector_add", tmp_path / "vector_add")
    return tmp_path


async def start(
    client: LanguageClient,
    root: Path,
    caps: types.ClientCapabilities | str | None = None,
    options: dict | None = None,
) -> types.InitializeResult:
    if caps is None:
        caps = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(configuration=True),
            text_document=types.TextDocumentClientCapabilities(
                publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
                hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            ),
        )
    elif isinstance(caps, str):
        caps = client_capabilities(caps)
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=BASE_OPTIONS if options is None else options,
        )
    )


def uri(path: Path) -> str:
    return path.resolve().as_uri()


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    u = uri(path)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=u,
                language_id="cuda",
                version=version,
                text=path.read_text() if text is None else text,
            )
        )
    )
    return u


def change_and_save(client: LanguageClient, path: Path, text: str, version: int, write: bool = True) -> None:
    """What an editor does on save: the buffer gets the text, the file gets written, didSave."""
    if write:
        path.write_text(text)
    u = uri(path)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=u, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u))
    )


async def diagnostics(
    client: LanguageClient,
    u: str,
    until: Callable[[Sequence[types.Diagnostic]], bool] = lambda d: True,
    timeout: float = 60.0,
) -> Sequence[types.Diagnostic]:
    """The diagnostics published for `u` once `until` holds for them (pop the uri first to wait
    for a fresh publication)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = client.diagnostics.get(u)
        if got is not None and until(got):
            return list(got)
        await asyncio.sleep(0.01)
    raise AssertionError(f"no matching diagnostics for {u} in {timeout}s; last: {client.diagnostics.get(u)}")


async def stats(client: LanguageClient) -> dict:
    """The server's counters (`kernelLsp/stats`); pygls hands back untyped results as namedtuples."""
    result = await client.protocol.send_request_async("kernelLsp/stats", None)
    return result if isinstance(result, dict) else result._asdict()
