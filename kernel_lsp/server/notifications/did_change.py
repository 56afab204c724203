"""With `checkOn: change`, a pause in typing triggers a check; by default only saves do."""

from __future__ import annotations

import asyncio

from lsprotocol import types

DEBOUNCE_S = 0.3


def register(server) -> None:
    timers: dict[str, asyncio.TimerHandle] = {}

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: types.DidChangeTextDocumentParams) -> None:
        ls.clangd.forward_notification(types.TEXT_DOCUMENT_DID_CHANGE, params)
        if ls.settings.check_on != "change":
            return
        uri = params.text_document.uri
        if (t := timers.pop(uri, None)) is not None:
            t.cancel()
        timers[uri] = asyncio.get_running_loop().call_later(DEBOUNCE_S, ls.request_check, uri, "change")
