"""textDocument/codeAction on a kernel:
- "Optimize <kernel> (FSR)" when its spec exists, "Optimize <entry> (FSR)" in an entry spec's
  launcher or a kernel it launches: runs the `kernelLsp.optimize` command (see
  execute_command.py). Without a GPU the action is shown disabled, with the reason, to clients
  that advertise `codeAction.disabledSupport`; other clients (Neovim 0.7) would offer it as if it
  worked, so they get the plain command, which answers with a message saying why nothing ran.
- "Write a spec skeleton for <kernel>" when the file has no spec yet: runs the
  `kernelLsp.writeSpecSkeleton` command (spec_skeleton.py), which creates `X.spec.py` with its
  content in one step. A CreateFile + TextDocumentEdit pair would leave an empty file on disk
  until the user saved the new buffer, and `--check` fails on an empty spec."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types

from .execute_command import OPTIMIZE_COMMAND, fsr_unavailable_message, gpu_absent_reason
from .spec_skeleton import WRITE_SPEC_COMMAND

if TYPE_CHECKING:
    from ..snapshot import DocumentSnapshot


def _kernels_at(source: str, line: int):
    """The kernel whose definition holds 0-based `line` (the last one starting above it); all
    kernels when the cursor is above the first."""
    from ...api.sources import find_kernels

    kernels = find_kernels(source)
    above = [k for k in kernels if k.line - 1 <= line]
    return [above[-1]] if above else kernels


def spec_mentions(spec_text: str, kernel: str) -> bool:
    """Whether a spec file describes `kernel` (as `kernel=` or in a pipeline), read as text: the
    spec is the user's code, and a code-action request should not run it."""
    return re.search(rf"""["']{re.escape(kernel)}["']""", spec_text) is not None


def register(server) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Source],
            resolve_provider=False,
        ),
    )
    def code_action(ls, params: types.CodeActionParams) -> list[types.CodeAction]:
        snapshot = ls.document_snapshot_now(params.text_document.uri, spec_text=True)
        if snapshot is None:
            return []
        # Whether FSR can run is asked (nvidia-smi) only where an optimize action is offered.
        blocked = None
        if optimize_targets(snapshot, params.range.start.line) and (no_gpu := gpu_absent_reason(ls)):
            blocked = fsr_unavailable_message(ls, no_gpu)
        caps = ls.client_capabilities.text_document
        shows_disabled = bool(caps and caps.code_action and caps.code_action.disabled_support)
        return code_actions(snapshot, params.range.start.line, blocked, shows_disabled)


def optimize_targets(snapshot: DocumentSnapshot, line: int) -> list[str]:
    """What "Optimize" offers at 0-based `line`: an entry spec's launcher, or a kernel it
    launches (the entry, the whole file, is optimized), and the kernel there its spec describes."""
    spec_text = snapshot.spec_text
    if spec_text is None or not snapshot.path.endswith(".cu"):
        return []
    from ...api.optimize import entries_at  # the optimizer loads on first use, not at start

    names = entries_at(snapshot.text, spec_text, line + 1)
    return names + [k.name for k in _kernels_at(snapshot.text, line) if spec_mentions(spec_text, k.name)]


def code_actions(
    snapshot: DocumentSnapshot, line: int, fsr_blocked: str | None, shows_disabled: bool
) -> list[types.CodeAction]:
    """The actions at 0-based `line`. `fsr_blocked`: why FSR cannot run here (None: it can);
    `shows_disabled`: the client shows a disabled action with its reason."""
    if not snapshot.path.endswith(".cu"):
        return []
    uri = snapshot.uri

    def optimize_action(name: str) -> types.CodeAction:
        title = f"Optimize {name} (FSR)"
        if fsr_blocked and shows_disabled:
            return types.CodeAction(
                title=title,
                kind=types.CodeActionKind.RefactorRewrite,
                disabled=types.CodeActionDisabled(reason=fsr_blocked),
            )
        command = types.Command(
            title=title, command=OPTIMIZE_COMMAND, arguments=[{"uri": uri, "kernel": name}]
        )
        return types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite, command=command)

    actions = [optimize_action(name) for name in optimize_targets(snapshot, line)]
    if snapshot.spec_text is None and not snapshot.spec_on_disk:
        for k in _kernels_at(snapshot.text, line):
            title = f"Write a spec skeleton for {k.name}"
            command = types.Command(
                title=title, command=WRITE_SPEC_COMMAND, arguments=[{"uri": uri, "kernel": k.name}]
            )
            actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.Source, command=command))
    return actions
