"""The file watcher's plain types and the include graph (who includes whom), for `check --watch`
and the server; the watcher itself comes from `Workspace.watch_folder`."""

from ..files import is_cuda
from ..include_graph import IncludeGraph, normalize, read_text
from ..model import Batch, ChangePlan, FolderWatch, Scan

__all__ = ["Batch", "ChangePlan", "FolderWatch", "IncludeGraph", "Scan", "is_cuda", "normalize", "read_text"]
