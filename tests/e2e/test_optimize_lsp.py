"""The FSR code action and commands through the real server process (pytest-lsp).

This machine has no GPU. The server starts through server_with_test_evaluator.py, which sets
optimizer.testing's make_content_evaluator as the optimizer's evaluator: the compile gate is real NVRTC, the GPU gates are
decided by the candidate's text (rules in KERNEL_LSP_TEST_RULES). The proposer is the real tuner
over the launch block size. Everything else — the code actions, $/progress, workspace/applyEdit
with a change annotation that needs confirmation, the version check, the report — is the real
server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from fixture_sources import VADD
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernel_lsp.optimizer.requirements import GET_A_GPU

pytestmark = pytest.mark.slow  # the slow tier (whole FSR runs through the server): python -m pytest -m slow

REPO = Path(__file__).resolve().parents[2]

SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b: {"c": a + b},
)
"""
NO_SPEC = """\
extern "C" __global__ void scale(const float* x, float* y, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}
"""
RULES = [
    ["block=512", 60e-6, ""],
    ["block=1024", 70e-6, ""],
    ["threadsPerBlock = 512;", 60e-6, ""],  # the entry sample's launcher constant
]


def _env(tmp: str, with_evaluator: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_CACHE_HOME"] = tmp
    if with_evaluator:
        env["KERNEL_LSP_TEST_RULES"] = json.dumps(RULES)
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, even on a machine that has one
        env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi
    return env


CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"klsp-e2e-fsr-{os.getpid()}")


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, str(Path(__file__).with_name("server_with_test_evaluator.py"))],
        server_env=_env(CACHE),
    )
)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "kernel_lsp"], server_env=_env(CACHE, False)
    )
)
async def nogpu(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    (tmp_path / "scale.cu").write_text(NO_SPEC)
    return tmp_path


async def _start(client: LanguageClient, root: Path, gpu: bool = True, disabled_support: bool = True) -> None:
    caps = types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            work_done_progress=True, show_document=types.ShowDocumentClientCapabilities(support=True)
        ),
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[types.ResourceOperationKind.Create],
                change_annotation_support=types.ChangeAnnotationsSupportOptions(groups_on_label=True),
            ),
        ),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(disabled_support=disabled_support)
        ),
    )
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=root.as_uri(),
            initialization_options={"arch": ["sm_90"], "gpu": {"enabled": gpu}},
        )
    )


def _open(client: LanguageClient, path: Path, version: int = 1) -> str:
    u = path.resolve().as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=u, language_id="cuda", version=version, text=path.read_text()
            )
        )
    )
    return u


async def _actions(client: LanguageClient, u: str, line: int) -> list[types.CodeAction]:
    # lsprotocol's client-side hook reads any item with a "command" key as a Command (dropping
    # kind, disabled, edit): take the raw JSON and read each item as the CodeAction it is.
    protocol = client.protocol
    if not getattr(protocol, "_raw_code_actions", False):
        result_type = protocol.get_result_type
        protocol.get_result_type = lambda m: None if m == types.TEXT_DOCUMENT_CODE_ACTION else result_type(m)
        protocol._raw_code_actions = True
    pos = types.Position(line=line, character=0)
    got = await protocol.send_request_async(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=u),
            range=types.Range(start=pos, end=pos),
            context=types.CodeActionContext(diagnostics=[]),
        ),
    )
    return [protocol._converter.structure(item, types.CodeAction) for item in got or []]


async def test_optimize_action_runs_fsr_and_ends_with_an_edit_that_needs_confirmation(client, ws):
    await _start(client, ws)
    u = _open(client, ws / "vadd.cu")
    (action,) = await _actions(client, u, 3)
    assert action.title == "Optimize vadd (FSR)" and action.disabled is None
    assert action.command.command == "kernelLsp.optimize"
    assert list(action.command.arguments) == [{"uri": u, "kernel": "vadd"}]

    edits: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert reply["applied"] is True, reply
    assert "faster than the kernel as written" in reply["message"]
    report = Path(reply["reportUri"].removeprefix("file://"))
    assert report.exists() and report.parent == ws / ".kernel-lsp" / "reports"
    (params,) = edits
    (doc_edit,) = params.edit.document_changes
    assert doc_edit.text_document.version == 1 and doc_edit.text_document.uri == u
    annotation = params.edit.change_annotations[doc_edit.edits[0].annotation_id]
    assert annotation.needs_confirmation is True and "FSR: vadd" in annotation.label
    assert any("block=512" in e.new_text for e in doc_edit.edits)
    # Progress (pytest-lsp's client records it): begin (cancellable), reports with round and
    # counts, end.
    (progress,) = client.progress_reports.values()
    assert isinstance(progress[0], types.WorkDoneProgressBegin) and progress[0].cancellable
    assert isinstance(progress[-1], types.WorkDoneProgressEnd)
    text = " ".join(p.message or "" for p in progress if isinstance(p, types.WorkDoneProgressReport))
    assert "round 1" in text and "compiled" in text and "correct" in text and "best" in text
    # The last report can be asked for.
    last = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelLsp.lastReport", arguments=[])
    )
    assert last == {"reportUri": reply["reportUri"]}


async def test_a_document_edited_during_the_run_is_not_changed(client, ws):
    await _start(client, ws)
    u = _open(client, ws / "vadd.cu")
    edits = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params):
        edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    run = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernelLsp.optimize", arguments=[{"uri": u, "kernel": "vadd"}])
        )
    )
    await asyncio.sleep(0.05)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=u, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=VADD + "// typing\n")],
        )
    )
    reply = await run
    assert reply["applied"] is False and "changed while FSR was running" in reply["message"], reply
    assert reply["reportUri"] and not edits


async def test_spec_skeleton_action_creates_the_spec_file_whole(client, ws):
    await _start(client, ws)
    u = _open(client, ws / "scale.cu")
    (action,) = await _actions(client, u, 2)
    assert action.title == "Write a spec skeleton for scale"
    # No CreateFile + TextDocumentEdit (an empty file on disk until the buffer is saved): a
    # command that writes the file with its content.
    assert action.edit is None and action.command.command == "kernelLsp.writeSpecSkeleton"
    spec = ws / "scale.spec.py"
    assert not spec.exists()
    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert reply["created"] is True, reply
    text = spec.read_text()
    assert 'kernel="scale"' in text and '"x": In("float32"' in text
    assert [p.uri for p in client.shown_documents] == [spec.resolve().as_uri()]
    assert not [p for p in ws.iterdir() if p.name.endswith(".tmp")]
    # Asked again (a stale action), the file the user may have edited meanwhile is kept.
    spec.write_text("# mine\n")
    again = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert again["created"] is False and "already exists" in again["message"]
    assert spec.read_text() == "# mine\n"
    # A kernel with a spec gets no skeleton action; a file whose spec exists never gets one.
    assert [a.title for a in await _actions(client, _open(client, ws / "vadd.cu"), 2)] == [
        "Optimize vadd (FSR)"
    ]
    assert await _actions(client, u, 2) == []


async def test_without_a_gpu_the_action_says_so_and_does_nothing(nogpu, ws):
    await _start(nogpu, ws, gpu=True)
    u = _open(nogpu, ws / "vadd.cu")
    (action,) = await _actions(nogpu, u, 3)
    assert action.title == "Optimize vadd (FSR)" and action.command is None
    # The words of hover and the CLI: why there is no GPU, how to get one (and an LLM).
    assert action.disabled is not None and action.disabled.reason.startswith(
        f"no GPU: CUDA_VISIBLE_DEVICES hides every GPU. {GET_A_GPU}"  # as the server's env says
    )
    reply = await nogpu.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelLsp.optimize", arguments=[{"uri": u, "kernel": "vadd"}])
    )
    assert reply["applied"] is False and reply["reportUri"] is None and GET_A_GPU in reply["message"]


async def test_without_disabled_support_the_action_answers_why(nogpu, ws):
    # Neovim 0.7 does not advertise codeAction.disabledSupport: a disabled action would look
    # like one that works and do nothing when picked. It gets the command, which says why.
    await _start(nogpu, ws, gpu=True, disabled_support=False)
    u = _open(nogpu, ws / "vadd.cu")
    (action,) = await _actions(nogpu, u, 3)
    assert action.title == "Optimize vadd (FSR)" and action.disabled is None
    assert action.command.command == "kernelLsp.optimize"
    reply = await nogpu.workspace_execute_command_async(
        types.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert reply["applied"] is False and GET_A_GPU in reply["message"]
    assert any(GET_A_GPU in m.message for m in nogpu.messages)


async def test_an_entry_specs_launcher_and_its_kernels_offer_to_optimize_the_entry(client, ws):
    """samples/entries/vector_add_bf16.cu: the spec names the launcher; the action shows on the
    launcher and on the kernel it launches, and the tuner's result (the launcher's block size)
    comes back as an edit of the file."""
    import shutil

    for name in ("vector_add_bf16.cu", "vector_add_bf16.spec.py"):
        shutil.copy(REPO / "samples" / "entries" / name, ws / name)
    await _start(client, ws)
    u = _open(client, ws / "vector_add_bf16.cu")
    lines = (ws / "vector_add_bf16.cu").read_text().splitlines()
    kernel_line = next(i for i, t in enumerate(lines) if "vector_add_bf16_kernel(" in t)
    launcher_line = next(i for i, t in enumerate(lines) if "threadsPerBlock = 256" in t)
    for line in (kernel_line + 2, launcher_line):
        (action,) = await _actions(client, u, line)
        assert action.title == "Optimize vector_add_bf16 (FSR)" and action.disabled is None
        assert list(action.command.arguments) == [{"uri": u, "kernel": "vector_add_bf16"}]
    assert await _actions(client, u, 0) == []  # the comment at the top belongs to neither

    edits: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert reply["applied"] is True, reply
    (params,) = edits
    (doc_edit,) = params.edit.document_changes
    assert [e.new_text for e in doc_edit.edits] == ["    const int threadsPerBlock = 512;\n"]
