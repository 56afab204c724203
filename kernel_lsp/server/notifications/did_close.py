"""A closed file keeps its diagnostics (it still exists on disk): re-check it from disk, since
the editor's unsaved text, which was the truth until now, is gone."""

from __future__ import annotations

from lsprotocol import types


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: types.DidCloseTextDocumentParams) -> None:
        ls.clangd.forward_notification(types.TEXT_DOCUMENT_DID_CLOSE, params)
        ls.request_check(params.text_document.uri, "close")
