"""Plain results and their words: light (core layer only), loaded at the server's start."""

from ..advice import for_editor
from ..codes import DESCRIPTIONS, describe, rule_id, unknown_selectors
from ..model import CheckStatus, CompileResult, Diagnostic, KernelResources, Severity, format_bytes
from ..stats import format_seconds

__all__ = [
    "DESCRIPTIONS",
    "CheckStatus",
    "CompileResult",
    "Diagnostic",
    "KernelResources",
    "Severity",
    "describe",
    "for_editor",
    "format_bytes",
    "format_seconds",
    "rule_id",
    "unknown_selectors",
]
