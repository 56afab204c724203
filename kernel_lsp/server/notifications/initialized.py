"""initialize / initialized: read initializationOptions, choose pull or push diagnostics, ask for
`workspace/configuration`, and warm the compile workers up."""

from __future__ import annotations

import asyncio
import inspect
import logging

from lsprotocol import types

log = logging.getLogger(__name__)


def register(server) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls, params: types.InitializeParams) -> None:
        if ls.client_log is not None:
            ls.client_log.connected()  # the log may go to the editor from here on
        caps = params.capabilities.text_document
        ls.new_session(bool(caps and caps.diagnostic), params.initialization_options)
        # Applied on the engine's first use, after this answer (at the latest in `initialized`):
        # the settings load the engine, which would double the editor's wait for the answer.
        ls.defer_settings(params.initialization_options, "initializationOptions")
        # The capabilities are computed when this handler returns: clangd's features are in them
        # only when clangd is enabled and its binary is there (found by looking, not running).
        from ..clangd.features import withdraw

        if not ls.clangd.decide(params.initialization_options):
            withdraw(ls)
        log.info(
            "client %s; %s diagnostics",
            params.client_info.name if params.client_info else "?",
            "pull" if ls.pull_diagnostics else "push",
        )

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls, params: types.InitializedParams) -> None:
        # The engine's modules are imported off the event loop first (about 0.5 s on 2 cores):
        # requests that arrive meanwhile are answered, not held behind the imports.
        await asyncio.to_thread(_import_engine)
        ls.engine  # noqa: B018 - the initializationOptions applied now, if nothing needed them yet
        ls.analysis.warm_up()
        ls.send_status(None)
        await refresh_configuration(ls)
        # The GPU probe can take seconds: the other features (the watcher) start beside it.
        results = await asyncio.gather(
            ls.gpu_feature.start(), *(hook() for hook in ls.initialized_hooks), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                log.error("start-up step failed", exc_info=result)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls, params=None) -> None:
        if ls.client_log is not None:
            ls.client_log.disconnected()  # the editor is ending the session: the log stays here
        if ls.built("analysis"):  # what was never built (no `initialized`) has nothing to stop
            ls.analysis.shutdown()
        if ls.built("gpu_feature"):
            ls.gpu_feature.stop()
        for hook in ls.shutdown_hooks:
            try:
                result = hook()
                if inspect.isawaitable(result):  # clangd is asked to shut down and waited for
                    await result
            except Exception:
                log.exception("shutdown step failed")


async def refresh_configuration(ls) -> bool:
    """Ask the client for the `kernelLsp` section; True when the settings changed."""
    ws = ls.client_capabilities.workspace
    if not (ws and ws.configuration):
        return False
    try:
        items = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section="kernelLsp")])
        )
    except Exception as e:  # a client may answer with an error; keep the settings we have
        log.warning("workspace/configuration failed: %s", e)
        return False
    raw = items[0] if items else None
    if raw is None:
        return False
    # Settings the client does not know fall back to initializationOptions, then defaults.
    merged = dict(ls.init_options) if isinstance(ls.init_options, dict) else {}
    if isinstance(merged.get("kernelLsp"), dict):
        merged = dict(merged["kernelLsp"])
    if isinstance(raw, dict):
        merged.update(raw)
    return ls.apply_settings(merged, "workspace/configuration")


def _import_engine() -> None:
    import importlib

    for name in ("kernel_lsp.workspace", "kernel_lsp.server.analysis", "kernel_lsp.server.gpu_feature"):
        importlib.import_module(name)
    from ...workspace import Workspace

    # The server keeps NVRTC out of its process and asks a child for its archs (issue 33): asked
    # here, off the event loop (100-190 ms more than loading NVRTC), before the settings need it.
    Workspace.compile_only_in_children()
