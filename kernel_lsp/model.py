"""Plain data the engine returns. Nothing here knows LSP; the server converts at its edge."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field, replace
from typing import Any, Protocol


class Severity(enum.IntEnum):
    # Ordered so that max() gives the worst finding.
    HINT = 1
    INFO = 2
    WARNING = 3
    ERROR = 4

    @property
    def label(self) -> str:
        return {4: "error", 3: "warning", 2: "info", 1: "hint"}[int(self)]


class CheckStatus(str, enum.Enum):
    """A GPU check's verdict (`KernelCheck.status`). A str: it prints, compares and serialises
    (JSON, SARIF, the editor) as the word it was before it was typed."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)

    OK = "ok"
    FAILED = "failed"  # ran, and a case did not verify
    UNAVAILABLE = "unavailable"  # no GPU answered
    COMPILE_ERROR = "compile_error"
    SPEC_ERROR = "spec_error"
    NO_SPEC = "no_spec"
    FENCED = "fenced"  # host code an LLM wrote that may not run
    ERROR = "error"  # something else went wrong (the original does not build, ...)


@dataclass(frozen=True)
class Diagnostic:
    """One finding. `line` and `col` are 1-based, as compilers print them; `end_col` is exclusive
    (0 means "to the end of the line")."""

    path: str
    line: int
    col: int
    severity: Severity
    message: str
    code: str | None = None
    source: str = "nvrtc"
    end_col: int = 0
    # Where the finding came from, when it is shown somewhere else (an error inside a header,
    # repeated at the #include line): (path, line, col).
    related: tuple[tuple[str, int, int, str], ...] = ()
    # A header's finding repeated at the `#include` line that leads to it (`related` holds the
    # header's own): the editor shows it there; reports show the header's once (report.report_once).
    header_copy: bool = False
    # The pip package whose header is missing (`nvidia-cublas`), when installing it is the fix:
    # text reports and the editor show one such finding per package, with the files it breaks.
    package: str = ""


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one entry function, plus occupancy computed from the arch's limits."""

    # The name a user and a spec use: "vadd", a template instance "total<float>", an overload
    # "relu(float*, int)" when the plain name is shared.
    name: str
    mangled: str  # entry symbol, e.g. "_Z4vaddPKfS0_Pfi"
    arch: str  # "sm_90"
    registers: int
    shared_bytes: int  # static shared memory
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int = 0
    const_bytes: int = 0
    line: int = 0  # 1-based line of the definition in the checked file (0: unknown)
    block_size: int | None = None  # of the first launch below that gives one
    occupancy: Occupancy | None = None
    function: str = ""  # the function's plain name in the source ("total"); "" means `name`
    # A kernel defined in a header the checked file includes (a template instantiated here):
    # the header's absolute path and the definition's line there. `line` is then a line of the
    # checked file that leads to it: an explicit instantiation, else the #include.
    defined_in: str = ""
    defined_at: int = 0
    # Where block sizes come from: the launch comment (an override), else each launch in host
    # code (distinct configurations), else __launch_bounds__; unresolved launches say why.
    launches: tuple[LaunchOccupancy, ...] = ()
    # The namespaces (and classes) around the function, as the source writes them ("ops::detail";
    # anonymous namespaces left out): `name` stays what a spec names, reports show both.
    scope: str = ""

    @property
    def source_function(self) -> str:
        return self.function or self.name

    @property
    def qualified_name(self) -> str:
        """`ops::fill<4>`: the name reports show, with the kernel's namespaces."""
        if not self.scope or self.name.startswith(self.scope + "::"):
            return self.name
        return f"{self.scope}::{self.name}"

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


@dataclass(frozen=True)
class LaunchOccupancy:
    """One launch configuration of a kernel, where it comes from, and its occupancy."""

    origin: str  # "comment" | "host" | "bounds"
    where: str  # "the launch comment at line 3", "the launch at saxpy.cu:88 in `launch_saxpy`"
    block_size: int | None = None
    occupancy: Occupancy | None = None
    note: str = ""  # why there is no figure, or what it leaves out

    @property
    def source(self) -> str:
        """`block 256 from the launch at saxpy.cu:88 in `f``, `bounded by __launch_bounds__(256)`."""
        if self.origin == "bounds":
            return f"bounded by {self.where}"
        return f"block {self.block_size} from {self.where}"

    def describe(self, arch: str = "") -> str:
        """`100% at 256 threads/block (...) — block 256 from the launch at saxpy.cu:88 in `f``."""
        source = self.source
        note = f" ({self.note})" if self.note else ""
        if self.occupancy is not None:
            return f"{self.occupancy.describe()} — {source}{note}"
        if self.block_size is not None:
            on = f" on {arch}" if arch else ""
            return f"n/a: a block of {self.block_size} threads cannot launch{on} — {source}{note}"
        return f"{self.where}: {self.note}"


@dataclass(frozen=True)
class Occupancy:
    block_size: int
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    limiter: str  # "warps", "registers", "shared memory", "blocks"

    @property
    def fraction(self) -> float:
        return self.active_warps_per_sm / self.max_warps_per_sm if self.max_warps_per_sm else 0.0

    def describe(self) -> str:
        """One wording for hover and the CLI: `75% at 256 threads/block (48/64 warps, limited by
        registers)`."""
        limiter = _LIMITER_WORDS.get(self.limiter, self.limiter)
        return (
            f"{self.fraction:.0%} at {self.block_size} threads/block "
            f"({self.active_warps_per_sm}/{self.max_warps_per_sm} warps, limited by {limiter})"
        )


# What bounds the resident blocks per SM, in words ("limited by warps" said nothing).
_LIMITER_WORDS = {
    "warps": "the SM's warp slots",
    "blocks": "the SM's block slots",
    "registers": "registers",
    "shared memory": "shared memory",
}


@dataclass
class CompileResult:
    """The outcome of compiling one file for one arch."""

    path: str
    arch: str
    ok: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)
    kernels: list[KernelResources] = field(default_factory=list)
    cubin: bytes | None = field(default=None, repr=False)
    log: str = field(default="", repr=False)
    # Log lines the parser did not understand: kept, never dropped silently.
    unparsed: list[str] = field(default_factory=list)
    # Headers the compile read (absolute paths), for the include graph.
    includes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    cached: bool = False
    compiler: str = "nvrtc"  # the backend that compiled it: "nvrtc" | "nvcc"
    # "full" (code generation: resources, ptxas findings) or "front-end" (nvcc's front end only:
    # its findings in a fraction of the time, no resources).
    stage: str = "full"
    timed_out: bool = False  # stopped at the compile time limit: not checked, not an error
    cancelled: bool = False  # stopped because a newer text replaced it: says nothing
    # nvcc -c: the host pass ran too (once per check, with its first arch: it is the same for all).
    host_pass: bool = False


def format_bytes(n: int) -> str:
    """Byte counts as hover, the CLI and reports show them."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


# Findings that say the check itself did not finish (a deadline, a memory limit, a crashed
# compiler): never a verdict on the code, and never cached, so the next check tries again.
NOT_CHECKED_IN_TIME = "not-checked-in-time"
OUT_OF_MEMORY = "out-of-memory"
FAULT_CODES = frozenset(
    {NOT_CHECKED_IN_TIME, OUT_OF_MEMORY, "crash", "timeout", "nvcc", "nvrtc", "disk-full"}
)


def files_broken(paths: list[str], named: int = 3) -> str:
    """The one wording of a missing package's reach (reports and the editor): `It breaks 14
    files: a.cu, b.cu, c.cu and 11 more.`"""
    names = [os.path.basename(p) for p in paths[:named]]
    more = f" and {len(paths) - named} more" if len(paths) > named else ""
    return f"It breaks {len(paths)} files: {', '.join(names)}{more}."


def not_checked_in_time(path: str, seconds: float, setting_name: str, what: str = "") -> Diagnostic:
    """The one wording for a check cut short by a deadline (any backend, the CLI and the server):
    information, not an error, since nothing is known about the code. `what` says what was still
    running ("nvcc", "the compile"); `setting_name` is the setting that raises the limit."""
    running = f"{what} did not finish" if what else "the check did not finish"
    return Diagnostic(
        path,
        1,
        1,
        Severity.INFO,
        f"not checked in time ({seconds:g} s): {running}; raise {setting_name} to wait longer",
        code=NOT_CHECKED_IN_TIME,
        source="kernel-lsp",
    )


def ran_out_of_memory(path: str, limit_bytes: int, setting_name: str, detail: str = "") -> Diagnostic:
    """A compile stopped by the memory limit (RLIMIT_AS): information, like a deadline; `detail`
    is what the compiler said ("LLVM ERROR: out of memory")."""
    limit = f"its limit of {limit_bytes >> 20} MiB" if limit_bytes > 0 else "the memory there is"
    said = f" ({detail.strip()})" if detail.strip() else ""
    return Diagnostic(
        path,
        1,
        1,
        Severity.INFO,
        f"not checked: the compiler ran out of memory at {limit}{said}; raise {setting_name} if the file needs more",
        code=OUT_OF_MEMORY,
        source="kernel-lsp",
    )


FALLBACK_ARCH = "sm_90"


# A file a header is checked through: (its path, the editor's text; None: read it from disk).
Includer = tuple[str, "str | None"]


@dataclass
class FileCheck:
    """One file's check: its findings, its compiles (resources per kernel), and where verified,
    its spec'd kernels' GPU checks; what every front end reports."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    results: list[CompileResult] = field(default_factory=list)
    checked: bool = True  # False: skipped (binary, too large, not UTF-8, gone)
    missing: bool = False  # the file no longer exists
    gpu_checks: list = field(default_factory=list)  # kernel_lsp.gpu.KernelCheck, when verified
    unverified: str = ""  # why its spec'd kernels were not verified on a GPU ("--no-gpu", "no GPU found")

    @property
    def kernels(self) -> list[KernelResources]:
        return [k for r in self.results for k in r.kernels]

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == Severity.WARNING)

    @property
    def incomplete(self) -> bool:
        """The check was cut short (a deadline, the memory limit): no verdict on the code; it
        fails `--check --strict` as a warning does."""
        return any(d.code in (NOT_CHECKED_IN_TIME, OUT_OF_MEMORY) for d in self.diagnostics)

    @property
    def front_end_only(self) -> bool:
        """A first look (NVRTC's, or nvcc's front end only): the full check's verdict replaces it."""
        return bool(self.results) and all(r.stage == "front-end" for r in self.results)


@dataclass(frozen=True)
class CompileOptions:
    """Backend-neutral: each backend turns these into its own flags."""

    arch: str = FALLBACK_ARCH
    include_dirs: tuple[str, ...] = ()
    system_include_dirs: tuple[str, ...] = ()  # -isystem (compile_commands.json, torch)
    defines: tuple[str, ...] = ()  # "NAME=value" or "NAME" -> -D
    undefines: tuple[str, ...] = ()  # -U
    default_device: bool = False
    relaxed_constexpr: bool = False  # --expt-relaxed-constexpr
    extended_lambda: bool = False  # --extended-lambda
    extra: tuple[str, ...] = ()  # more flags for the backend, passed as they are
    std: str = "c++17"
    # "auto": nvcc's verdict, with NVRTC answering where it sees what nvcc sees (compile/verdict.py).
    compiler: str = "auto"
    # With nvcc: compile the host side too (`nvcc -c`), also for a file without host code.
    host_check: bool = False
    # What the file's build makes of it (compile_commands.json): "object" (`-c`: the host pass
    # runs), "cubin", "fatbin", "ptx" (the device pass alone), "device" (the device pass: an arch
    # after the first, whose host pass the first arch's compile ran), "" (from the text: `-c` for a
    # file with host code, the device pass for a device-only one).
    build_output: str = ""
    # The compiler the file's compile_commands.json entry runs ("nvcc": nvcc decides).
    database_compiler: str = ""
    # nvcc's time limit in seconds (None: KERNEL_LSP_NVCC_TIMEOUT_S or 60). Not part of what a
    # result means: equal options and cache keys whatever it is (a result that ran out of time
    # is never cached).
    timeout_s: float | None = field(default=None, compare=False, repr=False)

    def with_arch(self, arch: str | None) -> CompileOptions:
        """These options for a device of `arch` (None: as they are). The one rule for the device
        arch: an `a`/`f` variant of that arch (sm_90a on an sm_90 device) is kept, any other arch
        is replaced by the device's."""
        if arch is None or self.arch.rstrip("af") == arch:
            return self
        return replace(self, arch=arch)

    def device_pass_only(self) -> CompileOptions:
        """These options for an arch after the first of a check: the first arch's compile runs
        the host pass where the build has one (it is the same for every arch), so this one runs
        nvcc's device pass alone."""
        return self if self.build_output == "ptx" else replace(self, build_output="device")


@dataclass(frozen=True)
class TimingSettings:
    """How a GPU check times each case (runner/timing.py measures by it): cold L2 or warm, the
    warm-up, the sampling budget and when the median is known well enough."""

    cold_l2: bool = True
    warmup_s: float = 0.025  # Triton's do_bench warms up for 25 ms too
    budget_s: float = 0.4  # wall time for sampling one case, after warm-up
    target_noise: float = 0.005  # stop when the median's relative standard error is <= 0.5%
    min_samples: int = 15
    max_samples: int = 5000
    batch_s: float = 0.01  # queue about this much GPU time between synchronisations

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TimingSettings:
        d = d or {}
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class LibraryBuild:
    """A `.cu` as a shared library. `fence`: None for the user's own file (trusted as the user's
    code), else the fence's findings for a candidate (empty: it may run, sandboxed)."""

    result: CompileResult
    library: bytes | None = field(default=None, repr=False)
    fence: list = field(default_factory=list)  # list[kernel_lsp.fence.Finding]
    trusted: bool = True
    link_log: str = field(default="", repr=False)
    options: CompileOptions | None = None  # what it was built with (a baseline is built alike)

    @property
    def ok(self) -> bool:
        return self.result.ok and self.library is not None and not self.fence

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """The compile's findings, then one error per fence finding (at its line)."""
        return list(self.result.diagnostics) + [
            Diagnostic(
                self.result.path,
                max(1, f.line),
                1,
                Severity.ERROR,
                f"host code not run: {f.message}",
                code=f"fence-{f.kind}",
                source="kernel-lsp fence",
            )
            for f in self.fence
        ]


# Where an nvcc was found, in the words of `--version`.
_NVCC_FROM = {"CUDA_HOME": "CUDA_HOME/CUDA_PATH", "wheel": "the nvidia-cuda-nvcc wheel", "PATH": "PATH"}


@dataclass(frozen=True)
class CudaVersions:
    """Which CUDA a check in this environment compiles with: NVRTC's version and nvcc's, with
    where that nvcc comes from (compile/versions.py asks them: `cuda_versions`)."""

    nvrtc: str | None  # "13.5"; None: NVRTC could not be loaded
    nvcc: str | None  # "13.5.37"; None: no nvcc, or it did not say
    nvcc_path: str | None = None
    nvcc_from: str = ""  # "CUDA_HOME", "wheel", "PATH"
    # Why the nvcc the environment names cannot be used (CUDA_HOME without bin/nvcc).
    nvcc_problem: str | None = None

    def summary(self) -> str:
        """`CUDA: NVRTC 13.5, nvcc 13.5.37`: the check summary's words."""
        nvcc = f"nvcc {self.nvcc}" if self.nvcc else "no nvcc" if not self.nvcc_path else "nvcc ?"
        if self.nvcc_problem:
            nvcc = f"no nvcc ({self.nvcc_problem})"
        return f"CUDA: NVRTC {self.nvrtc or 'unavailable'}, {nvcc}"

    def describe(self) -> str:
        """`--version`'s lines: each compiler's version and where it comes from."""
        nvrtc = f"NVRTC {self.nvrtc}" if self.nvrtc else "NVRTC: unavailable (install cuda-python[all])"
        if self.nvcc_problem:
            nvcc = f"nvcc: {self.nvcc_problem}"
        elif not self.nvcc_path:
            nvcc = "nvcc: not found (CUDA_HOME/CUDA_PATH, the nvidia-cuda-nvcc wheel, PATH)"
        else:
            where = _NVCC_FROM.get(self.nvcc_from, self.nvcc_from)
            nvcc = f"nvcc {self.nvcc or '(version unknown)'}: {self.nvcc_path} (from {where})"
        return f"{nvrtc}\n{nvcc}"

    def to_dict(self) -> dict:
        found = {
            "nvrtc": self.nvrtc,
            "nvcc": self.nvcc,
            "nvccPath": self.nvcc_path,
            "nvccFrom": self.nvcc_from or None,
        }
        return found | ({"nvccProblem": self.nvcc_problem} if self.nvcc_problem else {})


# --- watching a folder (the engine's watch.py; check --watch and the server take these) -------


@dataclass(frozen=True)
class Batch:
    """What changed on disk in one folder over a debounce window: distinct paths."""

    changed: frozenset[str] = frozenset()  # created, modified or moved here
    deleted: frozenset[str] = frozenset()  # deleted or moved away
    deleted_dirs: frozenset[str] = frozenset()  # folders deleted or moved away (files unknown)
    rules_changed: bool = False  # a .gitignore changed
    database_changed: bool = False  # a compile_commands.json was written, moved or deleted
    events: int = 0  # raw events folded into this batch

    def __bool__(self) -> bool:
        return bool(
            self.changed or self.deleted or self.deleted_dirs or self.rules_changed or self.database_changed
        )


@dataclass
class ChangePlan:
    """What a batch means for checks (the include graph's reading of it: Workspace.plan_changes)."""

    changed: set[str] = field(default_factory=set)  # watched CUDA files that changed themselves
    dependents: set[str] = field(default_factory=set)  # files that read a changed header or spec
    forget: set[str] = field(default_factory=set)  # deleted files

    @property
    def check(self) -> set[str]:
        return (self.changed | self.dependents) - self.forget


@dataclass
class Scan:
    """The watched files under a folder, as a walk found them."""

    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # folders that could not be read
    truncated: bool = False


class FolderWatch(Protocol):
    """A folder watched for CUDA and spec files that change on disk (Workspace.watch_folder):
    started and stopped by the front end that asked, its batches handed to that front end's
    callback from the watcher's own thread."""

    @property
    def root(self) -> str: ...

    @property
    def exclude(self) -> tuple[str, ...]: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def scan(self, limit: int = ...) -> Scan: ...


class RayUnavailable(RuntimeError):
    """Ray is not installed, or no cluster answers at the address: the message says which."""
