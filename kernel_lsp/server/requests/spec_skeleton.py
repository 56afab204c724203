"""workspace/executeCommand `kernelLsp.writeSpecSkeleton` [{"uri", "kernel"}] → {"created",
"specUri", "message"}: writes `X.spec.py` for a kernel that has none, with its whole content at
once, then asks the editor to show it.

Why a command and not a WorkspaceEdit: LSP's CreateFile has no content, so CreateFile plus a
TextDocumentEdit makes the editor write an empty file to disk and hold the skeleton in an unsaved
buffer; `--check` run meanwhile (pre-commit, CI) fails on the empty spec. The file appears whole
or not at all, and an existing file is never touched: the user's spec is not ours to overwrite."""

from __future__ import annotations

import logging
import os
from typing import Any

from lsprotocol import types

from ..uris import path_to_uri
from .kernel_argument import uri_and_kernel

log = logging.getLogger(__name__)

WRITE_SPEC_COMMAND = "kernelLsp.writeSpecSkeleton"


def _reply(created: bool, spec_uri: str | None, message: str) -> dict[str, Any]:
    return {"created": created, "specUri": spec_uri, "message": message}


def register(server) -> None:
    @server.command(WRITE_SPEC_COMMAND)
    async def write_spec_skeleton(ls, *args) -> dict[str, Any]:
        # The skeleton's reader and the spec package load here, on first use, not at start-up.
        from ...api.skeletons import files_pipeline, skeleton_for, spec_skeleton
        from ...api.sources import find_kernels, inside, parse_directives, replace_file, spec_path_for

        parsed = uri_and_kernel(args)
        if parsed is None:
            return _reply(False, None, f'{WRITE_SPEC_COMMAND} expects [{{"uri": "...", "kernel": "..."}}]')
        uri, name = parsed
        snapshot = ls.document_snapshot_now(uri)
        if snapshot is None or (not snapshot.text and snapshot.unreadable):  # not UTF-8 is readable here
            return _reply(False, None, f"cannot read {uri}")
        path, source = snapshot.path, snapshot.text
        kernel = next((k for k in find_kernels(source) if k.name == name), None)
        if kernel is None:
            return _reply(False, None, f"no kernel named {name!r} in {os.path.basename(path)}")
        spec_path = spec_path_for(path)
        spec_uri = path_to_uri(spec_path)
        root = ls.root_path()
        if root and not inside(os.path.dirname(spec_path), root):
            message = (
                f"{os.path.dirname(spec_path)} lies outside the workspace (through a link): no spec written"
            )
            ls.show_warning(f"kernel-lsp: {message}")
            return _reply(False, None, message)
        try:
            # Whole or not at all, never over a file or through a link there (safe_write.py).
            # A kernel of the file's one pipeline gets the pipeline's spec, as `kernel-lsp spec` does.
            pipeline = files_pipeline(source)
            text = (
                skeleton_for(source, pipeline, path)
                if kernel.name in pipeline
                else spec_skeleton(kernel, parse_directives(source), source)
            )
            replace_file(spec_path, text, overwrite=False)
        except FileExistsError:
            message = f"{os.path.basename(spec_path)} already exists; it was left as it is."
            ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
            return _reply(False, spec_uri, message)
        except OSError as e:
            message = f"cannot write {spec_path}: {e.strerror or e}"
            ls.show_warning(f"kernel-lsp: {message}")
            return _reply(False, None, message)
        log.info("wrote the spec skeleton %s", spec_path)
        caps = ls.client_capabilities.window
        if caps and caps.show_document and caps.show_document.support:
            try:
                await ls.window_show_document_async(types.ShowDocumentParams(uri=spec_uri, take_focus=True))
            except Exception:  # the file is written; showing it is a courtesy
                log.debug("window/showDocument failed", exc_info=True)
        # The kernel file's check reads the new spec.
        ls.request_check(uri, "save")
        return _reply(True, spec_uri, f"wrote {os.path.basename(spec_path)}: fill in the reference and sizes")
