from __future__ import annotations

from lsprotocol import types

from ..uris import uri_to_path


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenTextDocumentParams) -> None:
        ls.user_acted(params.text_document.uri)
        ls.clangd.did_open(params)
        ls.request_check(params.text_document.uri, "open")
        # A header's templates show their instances' resources: check the files that make them.
        path = uri_to_path(params.text_document.uri)
        watching = getattr(ls, "watching", None)
        if path and not path.endswith(".cu") and watching is not None:
            watching.check_instances(path)
