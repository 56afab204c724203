"""What a GPU check is asked, as plain data: `GpuCheckRequest`, the one argument of
`GpuSession.check`, `GpuSession.prove` and `GpuSession.add_occupancy`, and `GpuCompareRequest`,
that of `GpuSession.compare` (kernel_lsp/gpu.py, which re-exports both). Here rather
than in gpu.py so that the optimizer, which reaches none of the GPU machinery itself
(tests/unit/test_architecture.py), can build the requests it hands its pooled sessions, as it
reads their answers from gpu_results (issue 47)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kernel_lsp.model import CompileResult

if TYPE_CHECKING:
    from kernel_lsp.evaluation.specs import SpecArg
    from kernel_lsp.gpu_results import DeviceInfo
    from kernel_lsp.model import FileCheck

__all__ = ["Artifact", "FileDone", "GpuCheckRequest", "GpuCompareRequest", "GpuPlan", "OpenGpu"]

# What a caller passes for the code to run: the compiled artifact (the one road), or compile
# options / None, which GpuSession compiles first (through the same compile_source and its cache).
Artifact = CompileResult | Any


@dataclass(frozen=True)
class GpuCheckRequest:
    """What to verify (and time) on the GPU: one kernel, or one host entry, of a file against its
    spec; what `GpuSession.check` takes (and `GpuSession.prove` and `GpuSession.add_occupancy`,
    which read all but `measure` and `reference`). One typed value rather than ten loose
    parameters, several of them optional and of the same type, so that a caller names what it
    passes (issue 47): `source` and `path` by position, the rest only by name. Frozen: a request is data, handed on (to a pool's GPU, to
    the sanitizer after the check) and never changed under a check that runs it."""

    source: str  # the text to run: an editor's unsaved buffer, or a candidate an LLM wrote
    path: str  # where it lives: the diagnostics name it, and its sidecar spec when `spec` is None
    _: KW_ONLY
    # The kernel (or host entry) the spec describes; None: the spec's first.
    kernel: str | None = None
    # The spec: a .spec.py path, a SpecLoad, a Spec or a sequence of them; None: the sidecar
    # spec beside `path` (kernel_lsp.spec.spec_path_for).
    spec: SpecArg = None
    # The spec file's text where it differs from the disk (an unsaved buffer); None: read it.
    spec_source: str | None = None
    # What runs: the compiled artifact (a CompileResult for the device's exact arch, or a
    # LibraryBuild for an entry spec), or compile options / None, which the session compiles
    # (builds) first, through the same cache.
    artifact: Artifact = None
    # The -D values the launch lines may use; None: those of compile options passed as
    # `artifact` (a CompileResult does not carry them to the launch lines).
    defines: tuple[str, ...] | None = None
    # Time it once verified; False: verify only.
    measure: bool = True
    # Also compare the outputs with the original's on the same inputs: (original source, its
    # artifact), or the original's source alone, run from `artifact` where that is compile
    # options (None: the defaults) or a LibraryBuild, and compiled with the default options where
    # it is a CompileResult. None: the spec's checks alone (and an entry spec's `baseline` file,
    # where the spec names one).
    reference: str | tuple[str, Artifact] | None = None


@dataclass(frozen=True)
class GpuCompareRequest:
    """What to time against what, A B A B on one GPU (`GpuSession.compare`): `baseline` and
    `candidate`, two versions of the kernel (or host entry) in the file at `path`, each run from its
    artifact, on the spec's timing size; the speedup counts where its interval's lower bound
    clears `min_speedup`. Typed for the reason GpuCheckRequest is: the two sources, the two
    artifacts and the spec were ten loose parameters, of which pairs had the same type (issue 47)."""

    baseline: str  # the original's text
    candidate: str  # the rewrite's text
    path: str  # where the original lives: its sidecar spec when `spec` is None
    _: KW_ONLY
    kernel: str | None = None  # as GpuCheckRequest.kernel
    spec: SpecArg = None  # as GpuCheckRequest.spec
    spec_source: str | None = None  # as GpuCheckRequest.spec_source
    # What each runs, as GpuCheckRequest.artifact. The candidate's None: the baseline's compile
    # options (or a LibraryBuild's options), so that both are built alike; where the baseline's is
    # a CompileResult, the default options.
    baseline_artifact: Artifact = None
    candidate_artifact: Artifact = None
    defines: tuple[str, ...] | None = None  # as GpuCheckRequest.defines
    min_speedup: float = 1.02


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


# What a run of `check` over many files asks of the GPUs (GpuPlan) and what it reports as each file
# ends (FileDone): scheduler.check_files takes the one and calls back with the other.
@dataclass
class FileDone:
    """One file finished (its compile check, and its GPU verification where it had one):
    `done` of `total` files so far; `gpu` the label of the GPU that verified it ("" none)."""

    check: FileCheck
    index: int
    done: int
    total: int
    gpu: str = ""
    verify_s: float = 0.0


class OpenGpu(Protocol):
    """A GPU the Workspace opened (`Workspace.open_gpus`: a `GpuSession`), as a front end holds
    it: where it is and what it is, for the names it shows; the front end hands it back to the
    Workspace's `verify`, `bench` and `profile`, and reaches no GPU machinery itself."""

    @property
    def device(self) -> DeviceInfo | None: ...

    @property
    def device_index(self) -> int: ...

    @property
    def host(self) -> str: ...


@dataclass
class GpuPlan:
    """How a run verifies: `gpus` (`--gpus`, None: every visible GPU on this machine, the
    setting's on Ray), `may_verify(path)` (False: its spec is only read), the ncu `profile`,
    and `log` for the one-off lines (GPU skipped, a device that did not answer)."""

    gpus: str | None = None
    may_verify: Callable[[str], bool] = lambda _path: True
    profile: bool = False
    log: Callable[[str], None] = _stderr
    arch: str | None = None  # the GPU's arch when known before the GPUs open (to prebuild for)
    # Files verified at once on each local GPU, each in a worker process of its own (timed
    # launches still have the GPU alone: runner/turns.py). None: `check_lanes()`'s choice.
    lanes: int | None = None
    device: str | None = field(default=None, init=False)  # what verified, once known
