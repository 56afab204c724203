"""The LSP requests kernel-lsp answers with clangd's answer, as clangd gave it.

pygls builds the capabilities from the registered features when `initialize` is answered, before
clangd runs (it starts in the background). So the handlers are always registered, with clangd
22's options (trigger characters, the semantic-token legend), and `withdraw` takes them out of the
capabilities when clangd is turned off or no binary is found: an editor that also runs its own
clangd, or none, is never offered empty completion lists or semantic tokens that would hide
another server's. A clangd that dies later answers null until it is restarted.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .rpc import RpcError
from .semantic_tokens import TOKEN_MODIFIERS, TOKEN_TYPES, in_range, remap

log = logging.getLogger(__name__)

# Method -> the options kernel-lsp advertises for it (clangd 22's own; None: a plain provider).
FORWARDED: dict[str, Any] = {
    types.TEXT_DOCUMENT_DEFINITION: None,
    types.TEXT_DOCUMENT_DECLARATION: None,
    types.TEXT_DOCUMENT_REFERENCES: None,
    types.TEXT_DOCUMENT_COMPLETION: types.CompletionOptions(
        trigger_characters=[".", "<", ">", ":", '"', "/", "*"], resolve_provider=False
    ),
    types.COMPLETION_ITEM_RESOLVE: None,
    types.TEXT_DOCUMENT_SIGNATURE_HELP: types.SignatureHelpOptions(
        trigger_characters=["(", ")", "{", "}", "<", ">", ","]
    ),
    types.TEXT_DOCUMENT_PREPARE_RENAME: None,
    types.TEXT_DOCUMENT_RENAME: None,
    types.TEXT_DOCUMENT_DOCUMENT_SYMBOL: None,
    types.WORKSPACE_SYMBOL: None,
    types.TEXT_DOCUMENT_INLAY_HINT: None,
    types.TEXT_DOCUMENT_FOLDING_RANGE: None,
    types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT: None,
}
SEMANTIC_TOKENS = (
    types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
    types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA,
    types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE,
)
LEGEND = types.SemanticTokensLegend(token_types=list(TOKEN_TYPES), token_modifiers=list(TOKEN_MODIFIERS))


async def ask(ls, method: str, params: Any) -> Any:
    """clangd's answer to `method`; null when there is no clangd. An error clangd answers with
    (a rename it refuses, say) goes to the editor as that error."""
    try:
        return await ls.clangd.request(method, params)
    except RpcError as e:
        if e.code is None:  # clangd went away under the request
            log.info("clangd: %s not answered: %s", method, e)
            return None
        raise JsonRpcException(str(e), e.code) from None


def without_clang_internals(result: Any) -> Any:
    """Completion without clang's own members of `threadIdx`/`blockIdx`/... (`__fetch_builtin_x()`,
    how clang implements them): nvcc knows no such names, a CUDA file never writes them."""
    items = result.get("items") if isinstance(result, dict) else result
    if not isinstance(items, list):
        return result
    kept = [
        i
        for i in items
        if not str(i.get("filterText") or i.get("label", "")).strip().startswith("__fetch_builtin_")
    ]
    if len(kept) == len(items):
        return result
    return dict(result, items=kept) if isinstance(result, dict) else kept


def register(server) -> None:
    server.initialized_hooks.append(server.clangd.start_in_background)
    server.shutdown_hooks.append(server.clangd.stop)
    server.after_check_hooks.append(server.clangd.after_check)
    for method, options in FORWARDED.items():
        if method == types.TEXT_DOCUMENT_COMPLETION:
            continue

        async def forward(ls, params, method=method):
            return await ask(ls, method, params)

        server.feature(method, options)(forward)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, FORWARDED[types.TEXT_DOCUMENT_COMPLETION])
    async def completion(ls, params: types.CompletionParams):
        return without_clang_internals(await ask(ls, types.TEXT_DOCUMENT_COMPLETION, params))

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def tokens_full(ls, params: types.SemanticTokensParams):
        return remap(await ask(ls, types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, params), ls.clangd.legend)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, LEGEND)
    async def tokens_delta(ls, params: types.SemanticTokensDeltaParams):
        if ls.clangd.legend.identity:
            return await ask(ls, types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, params)
        full = types.SemanticTokensParams(text_document=params.text_document)
        return remap(await ask(ls, types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, full), ls.clangd.legend)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, LEGEND)
    async def tokens_range(ls, params: types.SemanticTokensRangeParams):
        full = types.SemanticTokensParams(text_document=params.text_document)
        tokens = remap(await ask(ls, types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, full), ls.clangd.legend)
        r = params.range
        return in_range(tokens, (r.start.line, r.start.character), (r.end.line, r.end.character))


def withdraw(ls) -> None:
    """Leave clangd's features out of the capabilities this server is about to announce."""
    features = ls.protocol.fm.features
    for method in (*FORWARDED, *SEMANTIC_TOKENS):
        features.pop(method, None)
