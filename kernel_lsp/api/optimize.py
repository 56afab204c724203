"""FSR runs over the Workspace, and their reports: the optimizer's one entry for the front ends."""

from ..optimizer.edits import line_edits
from ..optimizer.entry import entries_at, named_entries
from ..optimizer.observers import PrintObserver
from ..optimizer.report import before_after_rows, unified_diff
from ..optimizer.requirements import fsr_cannot_run
from ..optimizer.session import OptimizeError, RunRequest, run
from ..optimizer.strategies import DEFAULT_STRATEGY, STRATEGIES

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "OptimizeError",
    "PrintObserver",
    "RunRequest",
    "before_after_rows",
    "entries_at",
    "fsr_cannot_run",
    "line_edits",
    "named_entries",
    "run",
    "unified_diff",
]
