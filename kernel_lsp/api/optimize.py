"""FSR runs over the Workspace, and their reports: the optimizer's one entry for the front ends.

The optimizer sits above the Workspace (kernel_lsp/workspace.py cannot import it), so its runs
start here: `request` builds a RunRequest the one way every front end must, with the file's own
settings (its pyproject.toml under the front end's), never the workspace root's."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from ..optimizer.edits import line_edits
from ..optimizer.entry import entries_at, named_entries
from ..optimizer.observers import PrintObserver
from ..optimizer.report import before_after_rows, unified_diff
from ..optimizer.requirements import fsr_cannot_run
from ..optimizer.session import OptimizeError, RunRequest, run
from ..optimizer.strategies import DEFAULT_STRATEGY, STRATEGIES
from ..workspace import Workspace

if TYPE_CHECKING:
    from typing_extensions import Unpack


class RunFields(TypedDict, total=False):
    """What a front end may set of a RunRequest (the rest comes from the Workspace)."""

    source: str | None
    spec_source: str | None
    proposer: str | None
    rounds: int | None
    candidates: int | None
    strategy: str
    min_speedup: float
    time_budget_s: float | None
    max_evaluations: int
    use_cache: bool
    cache_dir: str | None
    workspace: str | None
    llm_temperature: float
    llm_timeout_s: float
    llm_concurrency: int
    llm_retries: int
    write_report: bool


def request(engine: Workspace, path: str, kernel: str, /, **fields: Unpack[RunFields]) -> RunRequest:
    """The RunRequest for `kernel` of `path`: the Workspace's settings for that file (the `-D`
    values the optimizer reads and the options it compiles with come from one place), that
    Workspace as the engine, and the front end's other fields (`workspace`: where reports go)."""
    return RunRequest(path=path, kernel=kernel, settings=engine.settings_for(path), engine=engine, **fields)


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
    "request",
    "run",
    "unified_diff",
]
