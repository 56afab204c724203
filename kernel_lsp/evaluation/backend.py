"""The evaluation backend interface: what runs compiled kernels on one GPU.

A backend takes compiled artifacts (CUBIN bytes) and launch steps, never source: compiling and
spec resolution happen before it (kernel_lsp.compile, kernel_lsp.evaluation.specs). `local` runs
a worker process on this machine's GPU; a cluster backend (Ray) implements the same methods.
Every result says the host and device index it came from.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.gpu_results import Comparison, KernelCheck
from kernel_lsp.runner.hardware import DeviceInfo
from kernel_lsp.spec import Spec

from .worker_process import ProgressFn

Built = tuple[bytes, list[dict[str, Any]]]  # (CUBIN, launch steps)


@runtime_checkable
class EvaluationBackend(Protocol):
    host: str
    device_index: int

    @property
    def available(self) -> bool:
        """Whether a GPU answers; `reason` says why not. Never raises."""

    @property
    def reason(self) -> str: ...

    @property
    def device(self) -> DeviceInfo | None:
        """The device description (attributes, measured bandwidth, peaks)."""

    def check(
        self,
        spec: Spec,
        spec_source: str | None,
        built: Built,
        measure: bool = True,
        baseline: Built | None = None,
        on_progress: ProgressFn | None = None,
    ) -> KernelCheck:
        """Verify against the spec (and the baseline's outputs), then time unless not `measure`."""

    def compare(
        self,
        spec: Spec,
        spec_source: str | None,
        baseline: Built,
        candidate: Built,
        min_speedup: float = 1.02,
        on_progress: ProgressFn | None = None,
    ) -> Comparison:
        """Interleaved A/B timing of two builds on this one device."""

    def profile(
        self,
        ncu: str,
        job: dict[str, Any],
        cubin: bytes,
        symbol_to_kernel: dict[str, str],
        main_path: str,
        main_text: str | None = None,
    ) -> ProfileReport:
        """One launch of the job's case under ncu: limiter, stalls, hot lines, achieved occupancy."""

    def close(self) -> None: ...
