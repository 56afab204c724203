"""textDocument/codeAction on a kernel:
- "Optimize <kernel> (FSR)" when its spec exists: runs the `kernelLsp.optimize` command (see
  execute_command.py). Without a GPU the action is shown disabled, with the reason, to clients
  that advertise `codeAction.disabledSupport`; other clients (Neovim 0.7) would offer it as if it
  worked, so they get the plain command, which answers with a message saying why nothing ran.
- "Write a spec skeleton for <kernel>" when the file has no spec yet: runs the
  `kernelLsp.writeSpecSkeleton` command (spec_skeleton.py), which creates `X.spec.py` with its
  content in one step. A CreateFile + TextDocumentEdit pair would leave an empty file on disk
  until the user saved the new buffer, and `--check` fails on an empty spec."""

from __future__ import annotations

import os
import re

from lsprotocol import types

from ...compile.files import read_text_file
from ...source import find_kernels
from ...spec import spec_path_for
from ..uris import uri_to_path
from .execute_command import OPTIMIZE_COMMAND, gpu_absent_reason
from .spec_skeleton import WRITE_SPEC_COMMAND


def _kernels_at(source: str, line: int):
    """The kernel whose definition holds 0-based `line` (the last one starting above it); all
    kernels when the cursor is above the first."""
    kernels = find_kernels(source)
    above = [k for k in kernels if k.line - 1 <= line]
    return [above[-1]] if above else kernels


def _spec_text(ls, spec_path: str) -> str | None:
    doc = ls.open_document(spec_path)
    if doc is not None:
        return doc.source
    try:
        return read_text_file(spec_path)  # a FIFO named x.spec.py must not block the loop
    except (OSError, UnicodeDecodeError):
        return None


def spec_mentions(spec_text: str, kernel: str) -> bool:
    """Whether a spec file describes `kernel` (as `kernel=` or in a pipeline), read as text: the
    spec is the user's code, and a code-action request should not run it."""
    return re.search(rf"""["']{re.escape(kernel)}["']""", spec_text) is not None


def shows_disabled_actions(ls) -> bool:
    caps = ls.client_capabilities.text_document
    return bool(caps and caps.code_action and caps.code_action.disabled_support)


def register(server) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Source],
            resolve_provider=False,
        ),
    )
    def code_action(ls, params: types.CodeActionParams) -> list[types.CodeAction]:
        path = uri_to_path(params.text_document.uri)
        if not path or not path.endswith(".cu"):
            return []
        doc = ls.workspace.get_text_document(params.text_document.uri)
        source = doc.source
        spec_path = spec_path_for(path)
        spec_text = _spec_text(ls, spec_path)
        actions: list[types.CodeAction] = []
        no_gpu = None
        for k in _kernels_at(source, params.range.start.line):
            if spec_text is not None and spec_mentions(spec_text, k.name):
                title = f"Optimize {k.name} (FSR)"
                if no_gpu is None:
                    no_gpu = gpu_absent_reason(ls) or ""
                if no_gpu and shows_disabled_actions(ls):
                    actions.append(
                        types.CodeAction(
                            title=title,
                            kind=types.CodeActionKind.RefactorRewrite,
                            disabled=types.CodeActionDisabled(
                                reason=f"{no_gpu}. FSR needs a GPU to verify and time candidates."
                            ),
                        )
                    )
                    continue
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.RefactorRewrite,
                        command=types.Command(
                            title=title,
                            command=OPTIMIZE_COMMAND,
                            arguments=[{"uri": params.text_document.uri, "kernel": k.name}],
                        ),
                    )
                )
            elif spec_text is None and not os.path.exists(spec_path):
                title = f"Write a spec skeleton for {k.name}"
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.Source,
                        command=types.Command(
                            title=title,
                            command=WRITE_SPEC_COMMAND,
                            arguments=[{"uri": params.text_document.uri, "kernel": k.name}],
                        ),
                    )
                )
        return actions
