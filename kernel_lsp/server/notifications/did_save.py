from __future__ import annotations

from lsprotocol import types


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls, params: types.DidSaveTextDocumentParams) -> None:
        ls.user_acted(params.text_document.uri)
        ls.clangd.forward_notification(types.TEXT_DOCUMENT_DID_SAVE, params)
        ls.request_check(params.text_document.uri, "save")
