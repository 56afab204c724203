"""The file watcher and the include graph (who includes whom), for `check --watch` and the server."""

from ..include_graph import IncludeGraph, normalize, read_text
from ..watch import Batch, WorkspaceWatcher, is_cuda, plan_batch

__all__ = ["Batch", "IncludeGraph", "WorkspaceWatcher", "is_cuda", "normalize", "plan_batch", "read_text"]
