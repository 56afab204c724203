"""textDocument/codeAction on a kernel:
- "Optimize <kernel> (FSR)" when its spec exists: runs the `kernelLsp.optimize` command (see
  execute_command.py). Without a GPU the action is shown disabled, with the reason, and does nothing.
- "Write a spec skeleton for <kernel>" when the file has no spec yet: a WorkspaceEdit that creates
  `X.spec.py` from the kernel's signature (never overwrites an existing file)."""

from __future__ import annotations

import os
import re

from lsprotocol import types

from ...source import find_kernels, parse_directives
from ...spec import spec_path_for, spec_skeleton
from ..uris import path_to_uri, uri_to_path
from .execute_command import OPTIMIZE_COMMAND, gpu_absent_reason


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
        with open(spec_path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


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
                if no_gpu:
                    actions.append(
                        types.CodeAction(
                            title=title,
                            kind=types.CodeActionKind.RefactorRewrite,
                            disabled=types.CodeActionDisabled(reason=f"FSR needs a GPU: {no_gpu}"),
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
                skeleton = spec_skeleton(k, parse_directives(source))
                spec_uri = path_to_uri(spec_path)
                actions.append(
                    types.CodeAction(
                        title=f"Write a spec skeleton for {k.name}",
                        kind=types.CodeActionKind.Source,
                        edit=types.WorkspaceEdit(
                            document_changes=[
                                # Neither overwrite nor ignoreIfExists: should the file appear
                                # meanwhile, the client fails the edit instead of writing into it.
                                types.CreateFile(
                                    uri=spec_uri,
                                    options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False),
                                ),
                                types.TextDocumentEdit(
                                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                                        uri=spec_uri, version=None
                                    ),
                                    edits=[
                                        types.TextEdit(
                                            range=types.Range(
                                                start=types.Position(line=0, character=0),
                                                end=types.Position(line=0, character=0),
                                            ),
                                            new_text=skeleton,
                                        )
                                    ],
                                ),
                            ]
                        ),
                    )
                )
        return actions
