"""The one front door to the engine: a `Workspace` that the server and every CLI command call.

A front end says what the user asked for (its settings: the editor's, or the command's flags) and
where the workspace is; the Workspace turns that into everything else, the same way for all of
them (rust-analyzer's `ide` crate is the model):

- **Settings for a file**: `[tool.kernel-lsp]` of the pyproject.toml nearest to the file (only the
  project's own keys, see `config.PROJECT_KEYS`: a repository cannot point the LLM's key at its
  own endpoint), overridden by the front end's settings. The server and the CLI find it alike.
- **Compile options for a file and an arch**: the settings, the project's `compile_commands.json`
  (searched upward from the file, as the CLI always did), PyTorch's include folders for an
  extension; `device_options` pins them to a GPU's exact arch.
- **analyze**: compile for every arch, findings, resources, the spec's static findings (no GPU).
- **open_gpus / verify**: sessions on the GPUs the settings name (local or Ray), and a file's
  spec'd kernels compiled for the device, verified and timed there.

Nothing here knows LSP or argparse; everything it returns is a plain dataclass. A Workspace is
picklable (the CLI's check workers receive it)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from .check import (
    INCLUDERS_CONSIDERED,
    FileCheck,
    FileSelection,
    Includer,
    check_bytes,
    check_path,
    collect_files,
    file_options,
    front_end_check,
    includers_for,
    includers_in,
    mark_unverified,
    project_include_dirs,
    unknown_codes,
)
from .codes import apply_selection
from .compile import CompileOptions
from .compile.compile_commands import Lookup, database_stamp
from .compile.includes import header_stamps, include_closure
from .compile.versions import cuda_versions
from .config import Settings, SettingsOverrides, find_pyproject, parse_overrides, settings_from_pyproject
from .files import decode_source, read_source
from .gpu_request import GpuCheckRequest, OpenGpu
from .include_graph import IncludeGraph
from .model import (
    Batch,
    ChangePlan,
    CompileResult,
    CudaVersions,
    Diagnostic,
    FolderWatch,
    LibraryBuild,
    TimingSettings,
)

if TYPE_CHECKING:  # the spec package (numpy) and the GPU side load where they are used, not in every worker
    from collections.abc import Sequence

    from .evaluation.pool import BackendPool
    from .evaluation.worker_process import ProgressFn
    from .fence import Finding
    from .gpu import GpuSession
    from .gpu_results import DeviceInfo, KernelCheck
    from .spec import Spec, SpecLoad

_Log = Callable[[str], None]
# Sessions, one per GPU, each lent to one job at a time (Workspace.gpu_pool).
GpuPool: TypeAlias = "BackendPool[GpuSession]"


class HasArch(Protocol):
    """What `Workspace.device_options` reads of a device (runner/hardware.DeviceInfo): its arch."""

    arch: str


class PrebuiltCompile(Protocol):
    """What `Workspace.verify` reads of a compile made already (check_jobs.Prebuilt)."""

    text: str
    options: CompileOptions
    artifact: CompileResult | None
    library: LibraryBuild | None


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


# What asked for a check: the editor opening, changing (as the user types) or saving a document,
# closing one (the file on disk again), a setting changed; a file changed on disk (a watcher);
# a project-wide walk nobody is looking at yet (`batch`: the server's start-up check, one at a
# time at a lower priority); `check --stdin`; the files of a `kernel-lsp check` run (`files`).
Trigger = Literal["open", "change", "save", "close", "settings", "watch", "batch", "stdin", "files"]


@dataclass(frozen=True)
class CheckRequest:
    """One file to check, as a front end asks for it: `path`, the editor's `text` (None: the file
    on disk), its spec's text (None: the spec on disk), the files that include it (a header is
    checked as they see it), its compile_commands.json lookup when the front end has it (a worker
    need not read the database itself), the cancel token of the check (compile/cancel.py), and
    what asked for it."""

    path: str
    text: str | None = None
    spec_text: str | None = None
    includers: tuple[Includer, ...] = ()
    project: Lookup | None = None
    cancel_token: str | None = None
    trigger: Trigger = "save"
    # A run that verifies as it goes (`check` with a GPU): a file with a spec that compiles
    # cleanly is also compiled for this arch in its check's worker (check_jobs.Prebuilt).
    gpu_arch: str | None = None


@dataclass
class Verification:
    """One file verified on one GPU: the options and artifact it ran, and each spec'd kernel's
    check (kernel_lsp.gpu_results.KernelCheck)."""

    path: str
    text: str | None  # the source it compiled (None: the file is gone)
    options: CompileOptions
    artifact: CompileResult | None
    checks: list = field(default_factory=list)
    spec_text: str | None = None
    # What `bench` adds: {check's kernel or entry: the kernels it launched, each with its share
    # of the time where the profile measured it} and, where it did not, why.
    launched: dict[str, list[LaunchedKernel]] = field(default_factory=dict)
    shares_note: dict[str, str] = field(default_factory=dict)


@dataclass
class LaunchedKernel:
    """One kernel a check ran (an entry's own launches, a pipeline's steps): its share of the
    kernels' summed GPU time in the profile (ncu, the largest timed case), None where that was
    not measured."""

    kernel: str
    share: float | None = None
    time_s: float | None = None


def launched_kernels(
    check: KernelCheck, spec: Spec, source: str, defines: tuple[str, ...] = ()
) -> tuple[list[LaunchedKernel], str]:
    """The kernels `check` ran, from the file's text (an entry's launches, helpers it calls
    included; a kernel spec's pipeline), with each one's share of the time from the check's
    profile; and a note that says why the shares are missing where they are."""
    from .host_launch.launcher import entry_kernels

    if spec.is_entry:
        names = entry_kernels(source, spec.entry or spec.kernel, defines)
    else:
        names = list(dict.fromkeys(spec.kernels or [spec.kernel]))
    profile = getattr(check, "profile", None)
    times: dict[str, float] = {}
    for k in getattr(profile, "kernels", None) or []:
        if k.duration_s is not None:
            bare = k.kernel.split("(")[0].split("<")[0].rpartition("::")[2]
            times[bare] = times.get(bare, 0.0) + k.duration_s
    known = [times.get(n) for n in names]
    total = sum(t for t in known if t is not None)
    if len(names) == 1 and not spec.is_entry:
        return [LaunchedKernel(names[0], 1.0, known[0])], ""
    if total > 0 and all(t is not None for t in known):
        return [
            LaunchedKernel(n, t / total, t) for n, t in zip(names, known, strict=True) if t is not None
        ], ""
    if not check.ok or not check.timings:
        why = "not measured: the check did not verify and time"
    elif profile is None:
        why = "not measured: per-kernel time comes from the ncu profile, which did not run (--no-occupancy)"
    elif profile.note:
        why = f"not measured: {profile.note}"
    else:
        missing = [n for n, t in zip(names, known, strict=True) if t is None]
        why = f"not measured: the profile has no time for {', '.join(missing)}"
    return [LaunchedKernel(n) for n in names], why


class Workspace:
    """`overrides`: the front end's settings, parsed by the front end (`config.parse_overrides`
    of the editor's `kernelLsp` section, or of the CLI's flags in the same shape; a raw object is
    parsed here), laid over each file's own settings; `root`: the workspace folder (relative include folders of
    the editor's settings are relative to it); `config`: a pyproject.toml to use for every file
    instead of each file's nearest one (`--config`); `base`: settings to start from instead of
    reading any pyproject.toml (`Workspace.fixed`, for callers that already hold Settings)."""

    def __init__(
        self,
        overrides: SettingsOverrides | Mapping[str, object] | None = None,
        root: str | None = None,
        config: str | None = None,
        base: Settings | None = None,
    ) -> None:
        # The front ends parse their settings (config.parse_overrides) and hand them over typed; a
        # raw mapping (tests, scripts) is parsed here, once.
        self.overrides = overrides if isinstance(overrides, SettingsOverrides) else parse_overrides(overrides)
        self.root = os.path.abspath(root) if root else None
        self.config = os.path.abspath(config) if config else None
        self.base = base
        self._lock = threading.Lock()
        # pyproject.toml -> (its stamp, the settings read from it, the problems found)
        self._settings: dict[str | None, tuple[tuple[int, int] | None, Settings, list[str]]] = {}

    # Workers receive a Workspace: the lock and the cache stay behind.
    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_settings")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._settings = {}

    def __repr__(self) -> str:  # the cache keys of checks hold it; never the API key
        return f"Workspace(root={self.root!r}, config={self.config!r}, overrides={self.overrides!r})"

    # --- settings -------------------------------------------------------------------------------

    @classmethod
    def fixed(cls, settings: Settings, root: str | None = None) -> Workspace:
        """A workspace whose settings are `settings` for every file (no pyproject.toml read)."""
        return cls(root=root, base=settings)

    def pyproject_for(self, path: str | None) -> str | None:
        if self.base is not None:
            return None
        if self.config:
            return self.config
        start = path or self.root or os.getcwd()
        return find_pyproject(start)

    def settings_for(self, path: str | None = None) -> Settings:
        """The settings that hold for `path` (None: the workspace's own)."""
        return self._resolve(path)[0]

    @property
    def settings(self) -> Settings:
        return self.settings_for(None)

    def problems(self, path: str | None = None) -> list[str]:
        """What could not be read (unknown keys, wrong types), for the user."""
        return self._resolve(path)[1]

    def _resolve(self, path: str | None) -> tuple[Settings, list[str]]:
        pyproject = self.pyproject_for(path)
        stamp = _stamp(pyproject) if pyproject else None
        with self._lock:
            cached = self._settings.get(pyproject)
            if cached is not None and cached[0] == stamp:
                return cached[1], cached[2]
        if pyproject:
            base, problems = settings_from_pyproject(pyproject)
        else:
            base, problems = self.base or Settings(), []
        settings, more = self.overrides.apply(base)
        if not base.runs_specs:  # a repository may keep its specs from running, never the reverse
            settings = replace(settings, specs_run="never")
        with self._lock:
            self._settings[pyproject] = (stamp, settings, problems + more)
        return settings, problems + more

    def with_overrides(self, **changes: object) -> Workspace:
        """The same workspace with some settings changed (CLI flags such as --no-gpu)."""
        return Workspace(self.overrides.merged(parse_overrides(changes)), self.root, self.config, self.base)

    # --- compile options --------------------------------------------------------------------------

    @staticmethod
    def cuda_versions() -> CudaVersions:
        """The NVRTC and nvcc a check compiles with (and where that nvcc comes from): the same for
        every workspace of this environment, so `--version` asks it before any Workspace exists.
        Asked on each call (nvcc's answer cached by its stamp); never raises."""
        return cuda_versions()

    @staticmethod
    def cuda_include_dirs() -> tuple[str, ...]:
        """The cudart and CCCL header folders of NVIDIA's wheels that every compile gets (NVRTC adds
        none itself): what clangd, behind the server, is given as its CUDA root."""
        from .compile.options import cuda_include_dirs

        return cuda_include_dirs()

    @staticmethod
    def compile_only_in_children() -> None:
        """For a process that compiles nothing itself (the server: its workers compile): what the
        compiler supports is asked of a child with NVRTC loaded, never loaded here (issue 33);
        asked now (once a process), so that the first settings do not wait for it."""
        from .compile.nvrtc import ask_nvrtc_in_child, supported_archs

        ask_nvrtc_in_child()
        supported_archs()

    def arch_problems(self, path: str | None = None) -> list[str]:
        """Why the compiler cannot compile for an arch the settings name, one message each."""
        from .compile.nvrtc import check_arch

        return [m for arch in self.settings_for(path).archs() if (m := check_arch(arch))]

    def graph_include_dirs(self, folders: list[str], path: str | None = None) -> tuple[str, ...]:
        """Where an include graph of `folders` looks for `#include`d files: the include folders of
        `path`'s settings (None: the workspace's), then those of every entry of the
        compile_commands.json governing each folder (the graph resolves includes without a
        file's own flags)."""
        settings = self.settings_for(path)
        archs = settings.archs()
        dirs = settings.compile_options(archs[0], self.root).include_dirs if archs else ()
        return dirs + project_include_dirs(settings, folders)

    @staticmethod
    def includers(graph: IncludeGraph, header: str, limit: int | None = INCLUDERS_CONSIDERED) -> list[str]:
        """The `.cu` files that include `header`, directly or not, nearest first, at most `limit`
        (None: all): the first is the context a header that fails alone is checked in, and their
        launches give its kernels' blocks."""
        return includers_in(graph, header, limit)

    @staticmethod
    def watch_folder(
        root: str,
        on_batch: Callable[[Batch], None],
        exclude: Iterable[str] = (),
        accept: Callable[[str], bool] | None = None,
    ) -> FolderWatch:
        """A watcher of `root`'s CUDA and spec files (watch.py; not started): debounced batches
        to `on_batch` from its own thread, less `exclude` (absolute globs) and what `accept`
        turns down. `start` raises OSError when the folder cannot be watched."""
        from .watch import WorkspaceWatcher

        return WorkspaceWatcher(root, on_batch, exclude, accept=accept)

    @staticmethod
    def plan_changes(batch: Batch, graph: IncludeGraph, known: Iterable[str] = ()) -> ChangePlan:
        """What a batch means for checks: the files to check again (changed ones, and those that
        include a changed header or own a changed spec) and those to forget, `graph` updated on
        the way; `known`: files the caller tracks beyond the graph (a deleted folder's)."""
        from .watch import plan_batch

        return plan_batch(batch, graph, known)

    def select_files(self, paths: list[str], force_exclude: bool = False) -> FileSelection:
        """The CUDA files under `paths` (folders walked, sorted; each file once), less what the
        `exclude` setting of the first path's settings matches; with `force_exclude` also the
        files named (check.collect_files)."""
        settings = self.settings_for(os.path.abspath(paths[0]) if paths else None)
        return collect_files(paths, settings.exclude, force_exclude)

    @staticmethod
    def unknown_codes(selectors: list[str]) -> list[str]:
        """The `--select`/`--ignore` selectors that can match no finding: a name no code starts
        with, a number the compiler has no diagnostic for."""
        return unknown_codes(selectors)

    def archs(self, path: str, source: str | None = None) -> list[str]:
        settings = self.settings_for(path)
        found, _ = file_options(path, source or "", settings, self.root)
        return settings.archs(found.flags)

    def compile_options(
        self, path: str, arch: str | None = None, source: str | None = None, includer: str | None = None
    ) -> CompileOptions:
        """The options `path` compiles with for `arch` (default: its first arch), as its check
        compiles it (check.file_options: the same recipe). `source`: the file's text, to see that
        it is a PyTorch extension (its include folders); `includer`: for a header, the file whose
        compile_commands.json entry it borrows."""
        settings = self.settings_for(path)
        found, options = file_options(path, source or "", settings, self.root, includer=includer)
        if arch is None:
            return options[0]
        return settings.compile_options(arch, self.root, found.flags)

    def device_options(self, path: str, device: HasArch | None, source: str | None = None) -> CompileOptions:
        """compile_options for a GPU's exact arch (an `a` variant such as sm_90a is kept)."""
        return self.compile_options(path, None, source).with_arch(device.arch if device else None)

    # --- analysis (no GPU) ------------------------------------------------------------------------

    def check_key(
        self,
        path: str,
        text: str | None,
        spec_path: str = "",
        spec_text: str | None = None,
        includers: tuple[Includer, ...] = (),
    ) -> tuple[str | None, Lookup]:
        """(the key a check of `path` with these inputs is cached under, the file's database
        flags): its text, settings, headers (through the project's -I folders too), spec, database
        and includers. None for a file read from disk (re-read each time: the watcher says when
        it changes) or one over the size limit. It reads headers and the database: call it off
        an editor's event loop. The flags go with the check (`CheckRequest.project`), so the
        worker need not read the database again."""
        settings = self.settings_for(path)
        project = settings.project_flags(path, self.root)
        if text is None or len(text) > settings.max_file_bytes:
            return None, project
        ident = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        # Not the project's -isystem folders: torch's or a toolkit's headers change with an
        # install, and scanning them would take seconds.
        dirs = tuple(settings.include_dirs) + (project.flags.include_dirs if project.flags else ())
        try:
            headers = include_closure(text, path, dirs)
        except Exception:
            headers = {}
        # The spec sidecar's findings are part of the result: its text, or its stamp on disk.
        spec = spec_text if spec_text is not None else header_stamps([spec_path])
        database = database_stamp(path, self.root, settings.compile_commands)
        context = [(p, t if t is not None else header_stamps([p])) for p, t in includers]
        raw = repr((path, ident, settings, header_stamps(headers), spec, database, context))
        return hashlib.sha256(raw.encode()).hexdigest(), project

    def analyze(
        self,
        path: str,
        text: str | None = None,
        spec_text: str | None = None,
        includers: tuple[Includer, ...] = (),
        project: Lookup | None = None,
    ) -> FileCheck:
        """Compile `path` (the editor's `text`, else the file on disk) for every arch: findings,
        resources, the spec's static findings. Never raises on user input. `project`: the file's
        compile_commands.json lookup when the caller has it (a worker then need not read the
        database itself)."""
        settings = self.settings_for(path)
        if text is None:
            return self.reported(check_path(path, settings, self.root, spec_text, includers, project))
        # The editor's text gets the same gate as a file on disk: the size limit, and no compile of
        # binary content (NVRTC would stop at the first NUL and report a clean file).
        data = text.encode("utf-8", "surrogatepass")
        return self.reported(check_bytes(data, path, settings, self.root, spec_text, includers, project))

    def file_requests(self, files: list[str], gpu_arch: str | None = None) -> list[CheckRequest]:
        """The checks of a run over `files` on disk (`kernel-lsp check`): a header that does not
        compile alone in the context of a file of the run that includes it (else of its
        compile_commands.json), each file's database flags read here, once, before the workers
        start (they need not read the database again)."""
        context = includers_for(files, self.settings)
        return [
            CheckRequest(
                f,
                includers=context.get(f, ()),
                project=self.settings_for(f).project_flags(f, self.root),
                trigger="files",
                gpu_arch=gpu_arch,
            )
            for f in files
        ]

    def text_request(self, path: str, text: str) -> CheckRequest:
        """A check of `text` as the file `path`, which need not exist (`check --stdin`): its
        folder's pyproject.toml and compile_commands.json, its spec, a header's includers on
        disk, as a file of a run sees them."""
        settings = self.settings_for(os.path.abspath(path))
        includers = includers_for([path], settings).get(path, ())
        return CheckRequest(
            path, text, None, includers, settings.project_flags(path, self.root), trigger="stdin"
        )

    def check(self, request: CheckRequest) -> FileCheck:
        """`analyze` for a CheckRequest (the server's save walk, the CLI's workers)."""
        r = request
        return self.analyze(r.path, r.text, r.spec_text, r.includers, r.project)

    @staticmethod
    def unverified(checks: Sequence[FileCheck], reason: str) -> None:
        """Say on each file that has a spec and compiled cleanly that its kernels were not verified,
        and why, so that a compile-only run is never mistaken for a verified one."""
        mark_unverified(list(checks), reason)

    def first_look_at(self, request: CheckRequest) -> FileCheck | None:
        """`first_look` for a CheckRequest."""
        r = request
        return self.first_look(r.path, r.text, r.spec_text, r.includers, r.project)

    def reported(self, check: FileCheck) -> FileCheck:
        """`check` with only the findings its file's `select`/`ignore` keep (kernel_lsp/codes.py),
        in place; every front end reports what this leaves."""
        settings = self.settings_for(check.path)
        check.diagnostics = apply_selection(check.diagnostics, settings.select, settings.ignored)
        return check

    def first_look(
        self,
        path: str,
        text: str | None = None,
        spec_text: str | None = None,
        includers: tuple[Includer, ...] = (),
        project: Lookup | None = None,
    ) -> FileCheck | None:
        """A first look for the first arch, while the full check runs (compile_front_end): NVRTC's
        findings where it sees what nvcc sees, else nvcc's front end's (no resources), in a
        fraction of the full check's time. None when there is nothing quicker to say (NVRTC
        answers alone, text that is not compiled at all)."""
        settings = self.settings_for(path)
        if text is None:
            source, _ = read_source(path, settings.max_file_bytes)
        else:
            source, _ = decode_source(text.encode("utf-8", "surrogatepass"), path, settings.max_file_bytes)
        if source is None:
            return None
        found = front_end_check(source, path, settings, self.root, spec_text, includers, project)
        return self.reported(found) if found is not None else None

    # --- files ------------------------------------------------------------------------------------

    def read(self, path: str) -> tuple[str | None, Diagnostic | None]:
        """`path`'s text as every front end reads it (BOM dropped, bytes that are not UTF-8 as "?",
        under its settings' size limit, never blocking on a FIFO), or None and why not."""
        return read_source(path, self.settings_for(path).max_file_bytes)

    def file_text(self, path: str, errors: str = "strict") -> str:
        """A regular file's text (a spec, a document the editor has not opened) through the
        engine's one reader: OSError for a FIFO, a device or a file over the size limit;
        UnicodeDecodeError, unless `errors` says how to decode bytes that are not UTF-8."""
        from .files import read_text_file

        return read_text_file(path, self.settings_for(path).max_file_bytes, errors)

    def load_specs(self, path: str, spec_path: str | None = None, spec_text: str | None = None) -> SpecLoad:
        """The specs of `path` (its sidecar, or `spec_path`), loaded in a worker under a deadline
        (spec/isolated.py): a spec is the user's Python and never runs in a front end's process."""
        from .spec import spec_path_for
        from .spec.isolated import load_specs_isolated

        return load_specs_isolated(spec_path or spec_path_for(path), spec_text)

    # --- GPUs -------------------------------------------------------------------------------------

    def open_gpus(
        self,
        gpus: str | None = None,
        log: _Log = print,
        path: str | None = None,
        launch_timeout_s: float = 5.0,
        timing: TimingSettings | None = None,
        lanes: int = 1,
    ) -> tuple[list[GpuSession], str]:
        """A GpuSession per GPU that answers, on the backend the settings choose (this machine's
        GPUs or Ray actors; `path`: the settings of that file, else the workspace's), and the
        reason when none does. Raises RayUnavailable when Ray was asked for explicitly and cannot
        serve."""
        from .evaluation.choose import open_backends
        from .gpu import GpuSession, no_gpu_message

        settings = self.settings_for(path)
        backends = open_backends(
            settings.evaluation_backend,
            gpus if gpus is not None else settings.gpu_devices,
            settings.gpu_device,
            settings.cluster_address,
            log,
            launch_timeout_s=launch_timeout_s,
            timing=timing,
            lanes=lanes,
        )
        usable, reason = [], ""
        for session in (GpuSession(backend=b) for b in backends):
            if session.available:
                usable.append(session)
                continue
            reason = reason or session.reason
            if len(backends) > 1:
                log(f"kernel-lsp: {gpu_label(session)} skipped: {no_gpu_message(session.reason)}")
            session.close()
        return usable, reason

    def gpu_absence(self, path: str | None = None) -> str | None:
        """Why no GPU can verify `path`'s kernels, in hover's and the editor's words
        (`gpu_reports.no_gpu_message`); None when one can: a GPU on this machine, the cluster of
        the settings' Ray backend, or the tests' fake GPU. Asks nvidia-smi, never CUDA: no
        context is created in the caller's process."""
        from .compile.options import local_gpu_arch
        from .evaluation.choose import wants_ray
        from .evaluation.local import fake_gpu_default, local_gpu_absence
        from .gpu_reports import no_gpu_message

        settings = self.settings_for(path)  # gpu.enabled is the front end's to word
        if (
            wants_ray(settings.evaluation_backend, settings.cluster_address)
            or local_gpu_arch()
            or fake_gpu_default()
        ):
            return None
        return no_gpu_message(local_gpu_absence())

    def gpu_session(self, path: str | None = None) -> GpuSession:
        """A GpuSession on this machine's GPU that `path`'s settings name (`gpu.device`; None:
        the workspace's), opened on first use (the editor's FSR without the GPU feature)."""
        from .gpu import GpuSession

        return GpuSession(device=self.settings_for(path).gpu_device)

    def verify(
        self,
        gpu: OpenGpu,
        path: str,
        text: str | None = None,
        spec_text: str | None = None,
        measure: bool = True,
        on_progress: ProgressFn | None = None,
        prebuilt: PrebuiltCompile | None = None,
    ) -> Verification:
        """Every kernel of `path` that its spec describes, compiled once for the session's device
        with the file's options, verified (and timed, with `measure`) there. `prebuilt`
        (check_jobs.Prebuilt): that compile made already, used when its text and options are
        the ones this would compile."""
        from .gpu import check_file

        session = _session(gpu)
        if text is None:
            # The text the compile check reads (BOM dropped, bytes that are not UTF-8 as "?").
            text, _ = read_source(path, self.settings_for(path).max_file_bytes)
        options = self.device_options(path, session.device, text)
        if text is None:  # gone since the compile check
            return Verification(path, None, options, None)
        library = None
        compile_s = 0.0
        if prebuilt is not None and prebuilt.text == text and prebuilt.options == options:
            artifact, library = prebuilt.artifact, prebuilt.library
        else:
            started = time.perf_counter()
            artifact = session.compile(text, path, options) if session.available else None
            compile_s = time.perf_counter() - started
        checks = check_file(session, path, text, options, measure, spec_text, on_progress, artifact, library)
        if compile_s:  # compiled again for the device (no prebuilt, or not the one it needs)
            for k in checks:
                if k.phases:
                    k.phases = {"compile": compile_s, **k.phases}
        return Verification(path, text, options, artifact, checks, spec_text)

    def bench(
        self,
        gpu: OpenGpu,
        path: str,
        text: str,
        specs: SpecLoad,
        names: list[str] | None = None,
        profile: bool = True,
    ) -> Verification:
        """`bench`'s run: the spec'd kernels and entries of `path` named by `names` (None: every
        one) in `specs` (loaded, spec/isolated.py), built as `check` and `optimize` build them (a
        compile for the device's exact arch, a shared library for entry specs, with the file's
        options), verified and timed; with `profile`, the ncu profile of each (occupancy, and each
        launched kernel's share of the time). Each check's launched kernels are in `launched`."""
        session = _session(gpu)
        options = self.device_options(path, session.device, text)
        chosen = [s for s in specs.specs if names is None or s.kernel in names or s.name in names]
        artifact = library = None
        if any(not s.is_entry for s in chosen):
            artifact = session.compile(text, path, options)
        if any(s.is_entry for s in chosen):
            library = session.build_library(text, path, options)
        out = Verification(path, text, options, artifact)
        defines = tuple(options.defines or ())
        for spec in chosen:
            built = library if spec.is_entry else artifact
            request = GpuCheckRequest(
                text, path, kernel=spec.kernel, spec=specs, artifact=built, defines=defines
            )
            check = session.check(request)
            if profile:
                session.add_occupancy(check, request)
            out.checks.append(check)
            out.launched[spec.kernel], note = launched_kernels(check, spec, text, defines)
            if note:
                out.shares_note[spec.kernel] = note
        return out

    def profile(self, gpu: OpenGpu, verification: Verification) -> None:
        """Add the ncu profile (limiter, stalls, hot lines, achieved occupancy) to each verified
        and timed check of `verification`, in place (seconds: after the verdict is shown)."""
        if verification.text is None:
            return
        session = _session(gpu)
        for check in verification.checks:
            artifact = verification.options if check.entry else verification.artifact  # an entry's library
            request = GpuCheckRequest(
                verification.text,
                verification.path,
                kernel=check.kernel,
                spec_source=verification.spec_text,
                artifact=artifact,
                defines=verification.options.defines,
            )
            session.add_occupancy(check, request)

    # --- candidates: what the optimizer asks (it reaches no compile, fence, GPU or evaluation
    # module of its own: tests/unit/test_architecture.py) ---------------------------------------

    def compile_text(self, source: str, path: str, options: CompileOptions) -> CompileResult:
        """`source` compiled as `path` with exactly `options`, in a compile worker (a candidate's
        gate 1 and the original's first compile: NVRTC or nvcc as for a save)."""
        from .compile import compile_isolated

        return compile_isolated(source, path, options)

    def build_library(
        self, source: str, path: str, options: CompileOptions, original: str | None = None
    ) -> LibraryBuild:
        """`source` as a shared library with exactly `options` (an entry spec's file). `original`:
        the user's text when `source` is a candidate an LLM wrote; the fence then checks its text
        and its host object first (LibraryBuild.fence)."""
        from .gpu import build_library

        return build_library(source, path, options, original)

    def files_read(
        self, source: str, original: str | None, path: str | None, include_dirs: Sequence[str] = ()
    ) -> list[Finding]:
        """The fence's findings about the files `source` would make a compiler read (includes
        outside the original's, `#embed`, `-include`): empty when it reads only what the original
        at `path` reads."""
        from .fence import check_files_read

        return check_files_read(source, original, path, include_dirs)

    def missing_kernels(self, artifact: CompileResult, kernels: Sequence[str]) -> list[str]:
        """Why each of `kernels` cannot be run from `artifact` (absent from it, or a template
        with several instances and none named); empty when every one can."""
        from .evaluation.specs import kernel_symbols

        return kernel_symbols(artifact, kernels)[1]

    @staticmethod
    def load_gpu_side() -> None:
        """Import the GPU side now (GpuSession, the evaluation backends, numpy: about 0.2 s): a
        front end that forks check workers calls it first, so that they inherit it rather than
        each importing it again."""
        from . import gpu  # noqa: F401
        from .evaluation import choose, pool  # noqa: F401

    def gpu_pool(self, sessions: Sequence[GpuSession]) -> GpuPool:
        """The sessions as one pool: each job borrows a free one for its whole run (one
        candidate per GPU at a time)."""
        from .evaluation.pool import BackendPool

        return BackendPool(sessions)


def _session(gpu: OpenGpu) -> GpuSession:
    """The session behind a front end's `OpenGpu` (one that `open_gpus` or `gpu_session` gave)."""
    from .gpu import GpuSession

    if not isinstance(gpu, GpuSession):
        raise TypeError(f"not a GPU the Workspace opened: {type(gpu).__name__}")
    return gpu


def gpu_name(device: DeviceInfo | None, host: str, unnamed: str = "GPU") -> str:
    """The device's name (`unnamed` when it has none), and the host when another machine holds it
    (a Ray cluster's GPU, for an editor on a machine without one): what hover, lenses and the
    status bar show."""
    import socket

    name = device.name if device else unnamed
    return name if not host or host == socket.gethostname() or host in name else f"{name} on {host}"


def gpu_label(session: OpenGpu) -> str:
    """`GPU 1` on this machine, `node-7 GPU 1` on another node of a cluster."""
    import socket

    if session.host in ("", socket.gethostname()):
        return f"GPU {session.device_index}"
    return f"{session.host} GPU {session.device_index}"
