"""Engine data → lsprotocol types. LSP positions are 0-based; the engine's are 1-based."""

from __future__ import annotations

from lsprotocol import types

from ..api.model import Diagnostic, Severity, for_editor
from .uris import path_to_uri

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


def to_range(line: int, col: int, end_col: int = 0, line_text: str | None = None) -> types.Range:
    start = types.Position(line=max(0, line - 1), character=max(0, col - 1))
    if end_col and end_col > col:
        end_char = end_col - 1
    elif line_text is not None:
        end_char = max(len(line_text), start.character + 1)
    else:
        end_char = start.character + 1
    return types.Range(start=start, end=types.Position(line=start.line, character=end_char))


def to_lsp(d: Diagnostic, lines: list[str] | None = None) -> types.Diagnostic:
    text = None
    if lines is not None and 0 < d.line <= len(lines) and not d.end_col:
        text = lines[d.line - 1]
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=path_to_uri(path), range=to_range(line, col)), message=message
        )
        for path, line, col, message in d.related
    ]
    message = for_editor(d.message)
    return types.Diagnostic(
        range=to_range(d.line, d.col, d.end_col, text),
        severity=_SEVERITY[d.severity],
        code=d.code,
        source=f"kernel-lsp ({d.source})" if d.source != "kernel-lsp" else "kernel-lsp",
        message=message,
        related_information=related or None,
    )
