"""textDocument/diagnostic: pull diagnostics for clients that support them."""

from __future__ import annotations

from lsprotocol import types

from ..uris import uri_to_path


def register(server) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier="kernel-lsp", inter_file_dependencies=True, workspace_diagnostics=False
        ),
    )
    async def diagnostic(ls, params: types.DocumentDiagnosticParams) -> types.FullDocumentDiagnosticReport:
        path = uri_to_path(params.text_document.uri)
        if path is None:
            return types.FullDocumentDiagnosticReport(items=[])
        if path not in ls.analysis.results and path.endswith((".cu", ".cuh")):
            ls.analysis.request(path, "open")
        await ls.analysis.wait(path)
        # The text the findings are placed in: the editor's, else the file's (as when pushed).
        snapshot = ls.document_snapshot_now(params.text_document.uri)
        return types.FullDocumentDiagnosticReport(
            items=ls.lsp_diagnostics(path, ls.analysis.findings_for(path), snapshot.lines)
        )
