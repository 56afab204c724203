"""Plain results and their words: light (core layer only), loaded at the server's start."""

from ..advice import for_editor
from ..codes import DESCRIPTIONS, describe, is_number, rule_id
from ..model import (
    CheckStatus,
    CompileResult,
    CudaVersions,
    Diagnostic,
    KernelResources,
    Severity,
    files_broken,
    format_bytes,
)
from ..stats import format_seconds

__all__ = [
    "DESCRIPTIONS",
    "CheckStatus",
    "CompileResult",
    "CudaVersions",
    "Diagnostic",
    "KernelResources",
    "Severity",
    "describe",
    "files_broken",
    "for_editor",
    "format_bytes",
    "format_seconds",
    "is_number",
    "rule_id",
]
