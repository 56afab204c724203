"""Settings: one shape for the server (initializationOptions and `workspace/configuration`
section `kernelLsp`) and the CLI (`[tool.kernel-lsp]` in pyproject.toml, overridden by flags).

Reading settings never fails: unknown keys and values of the wrong type are reported as problems
and the default is kept."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .codes import unknown_selectors
from .compile import (
    COMPILE_MEMORY_MB,
    JOB_TIMEOUT_S,
    CompileOptions,
    check_arch,
    resolve_arch,
)
from .compile.compile_commands import MAX_DATABASE_BYTES, CommandFlags, Lookup, flags_for
from .compile.nvcc_args import macro_name
from .compile.options import define_problem
from .files import MAX_FILE_BYTES, read_regular
from .settings_shape import flatten_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


MAX_PYPROJECT_BYTES = 16 * 2**20
SPECS_RUN = ("onAction", "never")


@dataclass(frozen=True)
class Settings:
    arch: tuple[str, ...] = ("auto",)
    include_dirs: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # glob patterns of folders/files skipped when walking folders
    defines: tuple[str, ...] = ()
    default_device: bool = False
    check_on: str = "save"  # "save" | "change"
    max_file_bytes: int = MAX_FILE_BYTES
    # The server's compile workers (25-55 MiB RSS each at idle) end after this long without a
    # check and start again on the next one; 0 keeps them. 60 s (was 300, issue 33): a save after
    # a respawn got its first findings as soon as with warm workers (reduce_float.cu 6.6 vs 6.1 s,
    # inst_000.cu 0.45 vs 0.55 s: within the spread), and the idle tree is one worker smaller.
    worker_idle_s: int = 60
    # The server checks a workspace folder's files at start-up when it holds at most this many
    # (0: never), in the background: after the open files, one at a time, in a worker at low
    # CPU priority. A larger folder's files are checked as they are opened or changed.
    startup_check_files: int = 50
    # One file's check (every arch and its spec) past this is stopped: "not checked in time".
    check_timeout_s: int = int(JOB_TIMEOUT_S)
    # nvcc's time limit per compile, in seconds (None: KERNEL_LSP_NVCC_TIMEOUT_S, else 60). A file
    # that runs out of time is "not checked in time", an information finding, never an error.
    compile_timeout_s: float | None = None
    # The address-space limit of each compile worker and the compilers it runs (MiB; 0: none).
    compile_memory_mb: int = COMPILE_MEMORY_MB
    # A compile_commands.json over this is not read (one warning says so).
    compile_commands_max_bytes: int = MAX_DATABASE_BYTES
    gpu_enabled: bool = True
    gpu_device: int | None = None
    # "all" or a number of GPUs from gpu_device on: spec'd files are verified in parallel.
    gpu_devices: str | None = None
    # Where GPU work runs: "local" (this machine's GPUs), "ray" (one actor per GPU of a Ray
    # cluster), "auto" (Ray when a cluster address is given, else local).
    evaluation_backend: str = "auto"
    cluster_address: str | None = None  # a Ray cluster to join (else RAY_ADDRESS; none: start one)
    achieved_occupancy: bool = True  # read it with ncu after a verification, where ncu is installed
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)  # never printed
    optimizer_rounds: int = 3
    optimizer_candidates: int = 4
    optimizer_proposer: str = "auto"  # "auto" | "llm" | "tune"
    # "auto" | "nvrtc" | "nvcc": auto = nvcc's verdict, NVRTC where it sees what nvcc sees
    compiler: str = "auto"
    host_check: bool = False  # nvcc -c also for files without host code (files with it get -c anyway)
    # compile_commands.json (or its folder) to use instead of the one found upward from each file
    compile_commands: str | None = None
    optimizer_allow_new_globals: bool = False  # run candidates that add `__device__` variables
    # When a spec (the workspace's Python) may run: "onAction" (when the user opens or saves its
    # kernel file, or runs a GPU check, bench or optimize) or "never" (read, never run). The
    # front ends turn it to "never" for a file the user has not acted on (see SECURITY.md).
    specs_run: str = "onAction"

    # clangd as a child process for navigation and completion (server/clangd/).
    clangd_enabled: bool = True
    clangd_diagnostics: str = "off"  # "off" | "agreeing": clangd's only on lines nvcc also flags
    clangd_background_index: bool = False  # clangd's --background-index (memory, CPU at start)
    # The clangd to run: user-level only (never from pyproject.toml, which a workspace holds).
    clangd_path: str | None = None

    @property
    def runs_specs(self) -> bool:
        return self.specs_run != "never"

    # Which findings are reported, by code (kernel_lsp/codes.py; ruff's select/ignore): empty
    # `select` is every code; `extend_ignore` adds to `ignore` (what the CLI's --ignore sets).
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_ignore: tuple[str, ...] = ()

    @property
    def ignored(self) -> tuple[str, ...]:
        return self.ignore + self.extend_ignore

    def archs(self, project: CommandFlags | None = None) -> list[str]:
        """The archs to check: the user's; else the project's (compile_commands.json), else the
        local GPU's or sm_90."""
        if project is not None and project.archs and self.arch in ((), ("auto",)):
            # A project may still build for archs this CUDA dropped (sm_70 and older in 13.x):
            # check the ones it can compile, else fall back to the default.
            usable = [a for a in project.archs if check_arch(a) is None]
            if usable:
                return usable
        out: list[str] = []
        for a in self.arch or ("auto",):
            r = resolve_arch(a)
            if r not in out:
                out.append(r)
        return out

    def project_flags(self, path: str, base_dir: str | None = None) -> Lookup:
        """The compile_commands.json flags for `path` (searched up to `base_dir`, the workspace
        root), or the database this setting names. Never raises; `problem` is for the user."""
        return flags_for(path, base_dir, self.compile_commands, self.compile_commands_max_bytes)

    @property
    def compile_memory_bytes(self) -> int:
        return self.compile_memory_mb * 2**20

    def compile_options(
        self, arch: str, base_dir: str | None = None, project: CommandFlags | None = None
    ) -> CompileOptions:
        """The one place options are built: the project's flags (compile_commands.json), then the
        settings' include folders and defines added after them."""
        dirs = tuple(
            d if os.path.isabs(d) or base_dir is None else os.path.normpath(os.path.join(base_dir, d))
            for d in self.include_dirs
        )
        base = CompileOptions(
            arch=arch,
            include_dirs=dirs,
            defines=self.defines,
            default_device=self.default_device,
            compiler=self.compiler,
            host_check=self.host_check,
            timeout_s=self.compile_timeout_s,
        )
        if project is None:
            return base
        return replace(
            base,
            include_dirs=tuple(dict.fromkeys(project.include_dirs + dirs)),
            system_include_dirs=project.system_include_dirs,
            # The settings' defines come after the database's flags: a -U of the same name there
            # is undone, as a later -D undoes it on a command line.
            defines=project.defines + self.defines,
            undefines=tuple(u for u in project.undefines if u not in {macro_name(d) for d in self.defines}),
            relaxed_constexpr=project.relaxed_constexpr,
            extended_lambda=project.extended_lambda,
            extra=project.extra,
            std=project.std or base.std,
            build_output=project.output,
            database_compiler=project.compiler,
        )


# camelCase / dotted key -> (field, type check)
_KEYS: dict[str, str] = {
    "arch": "arch",
    "includeDirs": "include_dirs",
    "include": "include_dirs",
    "defines": "defines",
    "exclude": "exclude",
    "defaultDevice": "default_device",
    "default-device": "default_device",
    "checkOn": "check_on",
    "maxFileBytes": "max_file_bytes",
    "workerIdleSeconds": "worker_idle_s",
    "worker-idle-seconds": "worker_idle_s",
    "startupCheckFiles": "startup_check_files",
    "startup-check-files": "startup_check_files",
    "checkTimeoutSeconds": "check_timeout_s",
    "check-timeout-seconds": "check_timeout_s",
    "compileMemoryMB": "compile_memory_mb",
    "compile-memory-mb": "compile_memory_mb",
    "compileCommandsMaxBytes": "compile_commands_max_bytes",
    "compile-commands-max-bytes": "compile_commands_max_bytes",
    "gpu.enabled": "gpu_enabled",
    "gpu.device": "gpu_device",
    "gpu.devices": "gpu_devices",
    "evaluation.backend": "evaluation_backend",
    "cluster.address": "cluster_address",
    "gpu.achievedOccupancy": "achieved_occupancy",
    "llm.baseUrl": "llm_base_url",
    "llm.model": "llm_model",
    "llm.apiKey": "llm_api_key",
    "optimizer.rounds": "optimizer_rounds",
    "optimizer.candidates": "optimizer_candidates",
    "optimizer.proposer": "optimizer_proposer",
    "compiler": "compiler",
    "compileTimeoutSeconds": "compile_timeout_s",
    "compile-timeout-seconds": "compile_timeout_s",
    "hostCheck": "host_check",
    "host-check": "host_check",
    "compileCommands": "compile_commands",
    "compile-commands": "compile_commands",
    "optimizer.allowNewGlobals": "optimizer_allow_new_globals",
    "select": "select",
    "ignore": "ignore",
    "extendIgnore": "extend_ignore",
    "extend-ignore": "extend_ignore",
    "specs.run": "specs_run",
    "clangd.enabled": "clangd_enabled",
    "clangd.diagnostics": "clangd_diagnostics",
    "clangd.backgroundIndex": "clangd_background_index",
    "clangd.background-index": "clangd_background_index",
    "clangd.path": "clangd_path",
}
_CODE_LISTS = ("select", "ignore", "extend_ignore")
_IGNORED = {"server.path", "interpreter", "trace.server", "trace"}
_CHOICES = {
    "check_on": ("save", "change"),
    "optimizer_proposer": ("auto", "llm", "tune"),
    "compiler": ("auto", "nvrtc", "nvcc"),
    "evaluation_backend": ("auto", "local", "ray"),
    "specs_run": SPECS_RUN,
    "clangd_diagnostics": ("off", "agreeing"),
}


@dataclass(frozen=True)
class SettingsOverrides:
    """A front end's settings, parsed once by the front end (the editor's `kernelLsp` section, the
    CLI's flags in the same shape): the Settings fields they set, each value coerced, and what
    could not be read. The Workspace lays them over each file's own settings (`apply`)."""

    changes: tuple[tuple[str, Any], ...] = ()  # (Settings field, value), in the order given
    # What could not be read, in order: a message, or (key, field, error) for a value of the
    # wrong type, worded with the value kept (which depends on the file's own settings).
    problems: tuple[str | tuple[str, str, str], ...] = ()

    def apply(self, base: Settings) -> tuple[Settings, list[str]]:
        """`base` with these settings over it, and the problems in words."""
        problems = [
            p if isinstance(p, str) else f"setting `{p[0]}`: {p[2]}; keeping {getattr(base, p[1])!r}"
            for p in self.problems
        ]
        return replace(base, **dict(self.changes)), problems

    def merged(self, later: SettingsOverrides) -> SettingsOverrides:
        """These settings with `later`'s over them (a CLI flag over the command's settings)."""
        changes = dict(self.changes)
        changes.update(later.changes)
        return SettingsOverrides(tuple(changes.items()), self.problems + later.problems)

    def __repr__(self) -> str:  # cache keys hold it (through the Workspace's): never the API key
        shown = [(k, "<set>" if k == "llm_api_key" and v else v) for k, v in self.changes]
        return f"SettingsOverrides({shown!r})"


def gpus_value(value: object) -> str | None:
    """`--gpus` and `gpu.devices` as written (`all` or a positive number of GPUs), normalized;
    None when it is neither. Syntax only: how many GPUs `all` means is asked when they open."""
    text = str(value).strip().lower()
    return text if text == "all" or (text.isdigit() and int(text) > 0) else None


def parse_overrides(raw: Any) -> SettingsOverrides:
    """Read a settings object (camelCase, nested or dotted; a `kernelLsp` wrapper is allowed):
    the front ends' one parser of their settings. Never raises: what cannot be read is a problem."""
    problems: list[str | tuple[str, str, str]] = []
    if raw is None:
        return SettingsOverrides()
    if not isinstance(raw, dict):
        return SettingsOverrides((), (f"settings must be an object, got {type(raw).__name__}",))
    types = {f.name: f.type for f in fields(Settings)}
    changes: dict[str, Any] = {}
    # A dict where a leaf setting belongs is a wrong type, not a section: kept whole, so that the
    # message names the setting (`includeDirs`), not a made-up key (`includeDirs.a`).
    for key, value in flatten_settings(raw, leaves=_KEYS).items():
        name = _KEYS.get(key) or (key.replace("-", "_") if key.replace("-", "_") in types else None)
        if name is None:
            if key not in _IGNORED and not key.startswith(("trace", "server", "interpreter")):
                problems.append(f"unknown setting `{key}`")
            continue
        if value is None:
            if name in (
                "gpu_device",
                "gpu_devices",
                "cluster_address",
                "llm_base_url",
                "llm_model",
                "llm_api_key",
                "compile_commands",
                "compile_timeout_s",
                "clangd_path",
            ):
                changes[name] = None
            continue
        try:
            changes[name] = _coerce(name, value)
        except (TypeError, ValueError) as e:
            problems.append((key, name, str(e)))
            continue
        if name in _CODE_LISTS:  # a selector that matches no code is a typo: say so, leave it out
            unknown = unknown_selectors(changes[name])
            problems += [f"setting `{key}`: no diagnostic code starts with `{u}`; left out" for u in unknown]
            changes[name] = tuple(c for c in changes[name] if c not in unknown)
        if name == "defines":  # one define that cannot be passed leaves the others in
            refused = [p for d in changes[name] if (p := define_problem(d))]
            problems += [f"setting `{key}`: {p}; left out" for p in refused]
            changes[name] = tuple(d for d in changes[name] if define_problem(d) is None)
    return SettingsOverrides(tuple(changes.items()), tuple(problems))


def settings_from_dict(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Apply a settings object (camelCase, nested or dotted; a `kernelLsp` wrapper is allowed)."""
    return parse_overrides(raw).apply(base or Settings())


def _coerce(name: str, value: Any) -> Any:
    if name in ("arch", "include_dirs", "defines", "exclude", *_CODE_LISTS):
        if isinstance(value, str):
            split = name == "arch" or name in _CODE_LISTS
            value = [v for v in value.replace(",", " ").split() if v] if split else [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise TypeError("expected a string or a list of strings")
        return tuple(value)
    if name in (
        "default_device",
        "gpu_enabled",
        "achieved_occupancy",
        "host_check",
        "optimizer_allow_new_globals",
        "clangd_enabled",
        "clangd_background_index",
    ):
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if name == "check_timeout_s":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("expected a positive number of seconds")
        return value
    if name == "gpu_devices":
        if isinstance(value, bool) or (text := gpus_value(value)) is None:
            raise ValueError('expected "all" or a positive number of GPUs')
        return text
    if name == "compile_timeout_s":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError("expected a positive number of seconds")
        return float(value)
    if name in (
        "max_file_bytes",
        "optimizer_rounds",
        "optimizer_candidates",
        "gpu_device",
        "worker_idle_s",
        "startup_check_files",
        "compile_memory_mb",
        "compile_commands_max_bytes",
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError("expected a non-negative integer")
        return value
    if not isinstance(value, str):
        raise TypeError("expected a string")
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ValueError(f"expected one of {', '.join(_CHOICES[name])}")
    return value


def find_pyproject(start: str) -> str | None:
    d = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        candidate = os.path.join(d, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


# Settings a repository's own pyproject.toml may not set: where the API key is sent, which
# cluster receives the code, which clangd runs. They come from the user (editor settings, flags,
# environment) only.
USER_ONLY = {
    "llm_base_url": "llm.baseUrl",
    "llm_api_key": "llm.apiKey",
    "cluster_address": "cluster.address",
    # the program the server starts next to itself
    "clangd_path": "clangd.path",
}


def settings_from_pyproject(path: str) -> tuple[Settings, list[str]]:
    try:
        data = tomllib.loads(read_regular(path, MAX_PYPROJECT_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return Settings(), [f"{path}: cannot read ({e})"]
    table = data.get("tool", {}).get("kernel-lsp", {})
    settings, problems = settings_from_dict(table)
    refused = [key for name, key in USER_ONLY.items() if getattr(settings, name) is not None]
    if refused:
        cleared: dict[str, Any] = dict.fromkeys(USER_ONLY, None)
        settings = replace(settings, **cleared)
        problems += [
            f"`{key}` is not read from pyproject.toml: set it in the editor or on the command line"
            for key in refused
        ]
    base = os.path.dirname(path)
    # Include folders in pyproject.toml are relative to it.
    dirs = tuple(
        d if os.path.isabs(d) else os.path.normpath(os.path.join(base, d)) for d in settings.include_dirs
    )
    excludes = tuple(os.path.normpath(os.path.join(base, e)) for e in settings.exclude)
    database = settings.compile_commands
    if database and not os.path.isabs(database):
        database = os.path.normpath(os.path.join(base, database))
    settings = replace(settings, include_dirs=dirs, exclude=excludes, compile_commands=database)
    return settings, [f"{path}: {p}" for p in problems]
