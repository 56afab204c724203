from __future__ import annotations

from lsprotocol import types


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenTextDocumentParams) -> None:
        ls.user_acted(params.text_document.uri)
        ls.clangd.did_open(params)
        ls.request_check(params.text_document.uri)
