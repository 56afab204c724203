"""workspace/executeCommand:
- `kernelLsp.optimize` [{"uri", "kernel"}] → {"applied", "reportUri", "message"}: an FSR run in the
  background with $/progress (round, candidates compiled and correct, best speedup), cancellable;
  it ends with a workspace/applyEdit whose change annotation needs confirmation, so the editor
  shows a preview. If the document changed meanwhile, nothing is applied and the report is kept.
- `kernelLsp.lastReport` → {"reportUri"}: the Markdown report of the last run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import uuid
from typing import Any

from lsprotocol import types

from ..uris import path_to_uri, uri_to_path
from .kernel_argument import uri_and_kernel

log = logging.getLogger(__name__)

OPTIMIZE_COMMAND = "kernelLsp.optimize"
LAST_REPORT_COMMAND = "kernelLsp.lastReport"
ANNOTATION = "kernel-lsp.fsr"


def _test_evaluator() -> bool:
    """Whether a test replaced the optimizer's GPU gates (optimizer/evaluator.INJECTED): set only
    by a test's own launcher, which loaded that module before the server started."""
    evaluators = sys.modules.get("kernel_lsp.optimizer.evaluator")
    return evaluators is not None and getattr(evaluators, "INJECTED", None) is not None


def gpu_absent_reason(ls) -> str | None:
    """None when FSR can run here, else why not: `no GPU: ...` (kernel_lsp.gpu.no_gpu_message)."""
    if _test_evaluator():
        return None
    from ...api.gpu import GPU_OFF_IN_EDITOR, no_gpu_message

    if not ls.settings.gpu_enabled:
        return no_gpu_message(GPU_OFF_IN_EDITOR)
    if ls.gpu is not None:
        return None
    return ls.engine.gpu_absence()


def fsr_unavailable_message(ls, no_gpu: str) -> str:
    """The optimize action's answer without a GPU: the CLI's words (kernel_lsp.optimizer.requirements)."""
    from ...api.optimize import fsr_cannot_run

    return fsr_cannot_run(no_gpu, ls.settings)


def _session(ls) -> Any:
    shared = getattr(ls.gpu, "session", None) if ls.gpu is not None else None
    if shared is not None:
        return shared
    state = ls.fsr
    if state.session is None and not _test_evaluator():
        state.session = ls.engine.gpu_session()
    return state.session


def _reply(applied: bool, report: str | None, message: str) -> dict[str, Any]:
    return {"applied": applied, "reportUri": report, "message": message}


def _edit(
    uri: str, version: int | None, old: str, new: str, label: str, description: str
) -> types.WorkspaceEdit:
    from kernel_lsp.api.optimize import line_edits

    edits = [
        types.AnnotatedTextEdit(
            range=types.Range(
                start=types.Position(line=e.start_line, character=0),
                end=types.Position(line=e.end_line, character=0),
            ),
            new_text=e.text,
            annotation_id=ANNOTATION,
        )
        for e in line_edits(old, new)
    ]
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ],
        change_annotations={
            ANNOTATION: types.ChangeAnnotation(label=label, needs_confirmation=True, description=description)
        },
    )


def register(server) -> None:
    @server.command(LAST_REPORT_COMMAND)
    def last_report(ls, *args) -> dict[str, Any]:
        return {"reportUri": ls.fsr.last_report}

    @server.command(OPTIMIZE_COMMAND)
    async def optimize(ls, *args) -> dict[str, Any]:
        return await _optimize(ls, args)


async def _optimize(ls, args: tuple) -> dict[str, Any]:
    """One FSR run: refused when it cannot run here, else run with progress and offered to the
    editor as an edit to confirm."""
    parsed = uri_and_kernel(args)
    if parsed is None:
        return _reply(False, None, 'kernelLsp.optimize expects [{"uri": "...", "kernel": "..."}]')
    uri, kernel = parsed
    path = uri_to_path(uri)
    if not path:
        return _reply(False, None, f"not a file: {uri}")
    refusal = _refusal(ls, path)
    if refusal is not None:
        return refusal
    snapshot = ls.document_snapshot_now(uri)
    if snapshot.unreadable:
        return _reply(False, None, f"cannot read {path}: {snapshot.unreadable}")
    from kernel_lsp.api.optimize import OptimizeError

    try:
        result = await _run(ls, path, kernel, snapshot.text)
    except OptimizeError as e:
        return _reply(False, ls.fsr.last_report, str(e))
    except Exception as e:
        log.exception("FSR run failed")
        return _reply(False, ls.fsr.last_report, f"FSR failed: {type(e).__name__}: {e}")
    if result.report_problem:
        ls.show_warning(f"kernel-lsp: FSR: {result.report_problem}")
    md = next((p for p in result.report_paths if p.endswith(".md")), None)
    ls.fsr.last_report = path_to_uri(md) if md else None
    return await _offer(ls, uri, path, kernel, snapshot.text, snapshot.version, result)


def _refusal(ls, path: str) -> dict[str, Any] | None:
    """The answer when no run starts: one is going on, specs may not run, no GPU."""
    if ls.fsr.running:
        return _reply(False, ls.fsr.last_report, "an FSR run is already going on; wait for it or cancel it")
    if not ls.engine.settings_for(path).runs_specs:
        message = 'specs.run is "never": FSR runs the kernel\'s spec (its reference), so nothing was run'
    elif reason := gpu_absent_reason(ls):
        message = fsr_unavailable_message(ls, reason)
    else:
        return None
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=message))
    return _reply(False, None, message)


class _Progress:
    """The run's $/progress (when the client supports it): begun, reported from the run's thread,
    ended; the editor's cancel sets `cancel`."""

    def __init__(self, ls, kernel: str) -> None:
        self.ls, self.kernel = ls, kernel
        self.token = str(uuid.uuid4())
        self.cancel = threading.Event()
        self.shown = False
        self.loop = asyncio.get_running_loop()

    async def begin(self) -> None:
        try:
            await self.ls.work_done_progress.create_async(self.token)
        except Exception:  # the client does not support server-initiated progress
            return
        self.shown = True
        begin = types.WorkDoneProgressBegin(
            title=f"FSR: optimizing {self.kernel}",
            cancellable=True,
            message="measuring the kernel as written",
        )
        self.ls.work_done_progress.begin(self.token, begin)
        fut = self.ls.work_done_progress.tokens.get(self.token)
        if fut is not None:
            fut.add_done_callback(lambda f: self.cancel.set() if f.cancelled() else None)

    def report(self, event) -> None:
        if self.shown:
            message = types.WorkDoneProgressReport(message=f"{event.headline}: {event.message}")
            self.loop.call_soon_threadsafe(self.ls.work_done_progress.report, self.token, message)

    def end(self) -> None:
        if self.shown:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message="done"))


async def _run(ls, path: str, kernel: str, source: str) -> Any:
    """The run, off the event loop, with its progress and the server's status; its result."""
    from kernel_lsp.api.optimize import request as optimize_request
    from kernel_lsp.api.optimize import run

    from ...api.sources import spec_path_for

    spec_doc = ls.open_document(spec_path_for(path))
    progress = _Progress(ls, kernel)
    await progress.begin()
    # The file's own settings (its pyproject.toml under the editor's), as the CLI's.
    req = optimize_request(
        ls.engine,
        path,
        kernel,
        source=source,
        spec_source=spec_doc.source if spec_doc is not None else None,
        workspace=ls.root_path() or os.path.dirname(path),
    )
    ls.fsr.running = True
    ls.send_status("optimizing", detail=f"FSR: {kernel}")
    try:
        # The GPU feature's other GPUs (gpu.devices) check candidates in parallel.
        pool = getattr(ls.gpu, "pool", None) if ls.gpu is not None else None
        more = pool.members[1:] if pool is not None else []
        return await progress.loop.run_in_executor(
            None, lambda: run(req, _session(ls), [progress.report], progress.cancel, more_sessions=more)
        )
    finally:
        ls.fsr.running = False
        ls.send_status(None)
        progress.end()


async def _offer(
    ls, uri: str, path: str, kernel: str, source: str, version: int | None, result
) -> dict[str, Any]:
    """The run's result as an edit the editor shows for confirmation; nothing when there is no
    better kernel or the document changed while the run went on."""
    report_uri = ls.fsr.last_report
    if result.accepted is None or not result.accepted.source:
        ls.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Info, message=f"FSR: {result.verdict}")
        )
        return _reply(False, report_uri, result.verdict)
    now = ls.open_document(path)
    if (now is not None and (now.version != version or now.source != source)) or (
        now is None and version is not None
    ):
        message = (
            f"{os.path.basename(path)} changed while FSR was running, so the result was not applied. "
            f"{result.verdict} The diff is in the report."
        )
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
        return _reply(False, report_uri, message)
    c = result.comparison
    label = f"FSR: {kernel} {c.speedup:.2f}x faster" if c else f"FSR: {kernel}"
    edit = _edit(uri, version, source, result.accepted.source, label, result.verdict)
    try:
        answer = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
    except Exception as e:
        return _reply(False, report_uri, f"{result.verdict} The editor did not apply the edit: {e}")
    if not answer.applied:
        why = f" ({answer.failure_reason})" if answer.failure_reason else ""
        return _reply(False, report_uri, f"{result.verdict} Not applied{why}.")
    return _reply(True, report_uri, result.verdict)
