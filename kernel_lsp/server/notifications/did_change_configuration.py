"""Settings changes apply without a restart: re-read them and re-check every open file."""

from __future__ import annotations

from lsprotocol import types

from .initialized import refresh_configuration


def register(server) -> None:
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls, params: types.DidChangeConfigurationParams) -> None:
        changed = await refresh_configuration(ls)
        if not changed and isinstance(params.settings, dict) and params.settings:
            changed = ls.apply_settings(params.settings, "didChangeConfiguration")
        if changed and ls.settings.gpu_enabled != (ls.gpu is not None):
            if ls.settings.gpu_enabled:
                await ls.gpu_feature.start()
            else:
                from ...api.gpu import GPU_OFF_IN_EDITOR, no_gpu_message

                ls.gpu_feature.stop()
                ls.gpu_down(no_gpu_message(GPU_OFF_IN_EDITOR))
        if changed:
            await ls.clangd.settings_changed()
        if changed and ls.watching is not None:
            await ls.watching.settings_changed()
        if changed:
            for uri in list(ls.workspace.text_documents):
                ls.request_check(uri, "settings")
