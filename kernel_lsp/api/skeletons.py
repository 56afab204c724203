"""Spec skeletons written from a file's text: a kernel's, a pipeline's, a launcher's entry spec
(`kernel-lsp spec` and the editor's code action)."""

from ..entry_skeleton import entry_skeleton, launcher_entries
from ..skeleton import files_pipeline, launcher_pipelines, skeleton_for, spec_skeleton

__all__ = [
    "entry_skeleton",
    "files_pipeline",
    "launcher_entries",
    "launcher_pipelines",
    "skeleton_for",
    "spec_skeleton",
]
