"""What a read-only request sees of one document, frozen at the moment it was asked: the text, the
analysis' latest check, the template instances other files compiled from it, and the GPU
feature's figures. The server builds one (`KernelLanguageServer.document_snapshot`); the handlers
in `requests/` are plain functions of (snapshot, params), testable without a server."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the GPU and check modules load with the engine, after start-up
    from ..api.checks import FileCheck
    from ..api.gpu import HotLine, KernelCheck
    from ..api.model import KernelResources


@dataclass(frozen=True)
class GpuFigures:
    """The GPU feature's results for one file. `absent_reason` is None when a GPU answered, else
    why there are no figures (kernel_lsp.gpu.no_gpu_message's wording)."""

    checks: tuple[KernelCheck, ...] = ()
    device: str = "GPU"  # the GPU's name, for "GPU check pending on <device>"
    absent_reason: str | None = None

    def check_for(self, kernel: str) -> KernelCheck | None:
        """A template's hover and lens show its instance's figures (`scale<float>` under `scale`)."""
        from ..api.sources import kernel_base_name

        return next((k for k in self.checks if k.kernel == kernel), None) or next(
            (k for k in self.checks if kernel_base_name(k.kernel) == kernel), None
        )

    def headline(self, kernel: str) -> str | None:
        k = self.check_for(kernel)
        return k.headline if k else None

    @property
    def entries(self) -> list[str]:
        """The host entries of this file that have results (hover and lenses go on them too)."""
        return [k.kernel for k in self.checks if k.entry]

    @property
    def hot_lines(self) -> list[HotLine]:
        """The hottest lines of every profiled kernel of this file."""
        return [h for k in self.checks if k.profile for h in k.profile.hot_lines]


@dataclass(frozen=True)
class DocumentSnapshot:
    uri: str
    path: str
    text: str  # the editor's text of an open document, else the file's ("" when unreadable)
    version: int | None = None  # the editor's version; None for a file read from disk
    unreadable: str | None = None  # why the file could not be read (or not as UTF-8: `text` has U+FFFD)
    check: FileCheck | None = None  # the analysis' latest result for this file
    # (checked file, kernel): instances other files compiled from templates written here.
    instances_elsewhere: tuple[tuple[str, KernelResources], ...] = ()
    gpu: GpuFigures = field(default_factory=GpuFigures)
    # The spec sidecar (`X.spec.py`): its text (the editor's when open; None when there is none,
    # it cannot be read, or the request did not ask for it; never run) and whether it is on disk.
    spec_text: str | None = None
    spec_on_disk: bool = False

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)
