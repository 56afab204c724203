"""Checks one file for every configured arch and merges the findings. Shared by the server, the
CLI and the watcher, so they agree on what a file's diagnostics are."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .codes import number_of, unknown_selectors
from .compile import (
    JOB_TIMEOUT_S,
    SKIPPED,
    CompileOptions,
    compile_front_end,
    compile_source,
    known_diagnostic_number,
    torch_ext,
)
from .compile.compile_commands import (
    CommandFlags,
    Database,
    Lookup,
    explicit_database,
    find_database,
    load_database,
)
from .compile.jobs import SPEC_PHASE, JobFailed, report_phase
from .compile.nvcc_args import macro_name
from .compile.torch_ext import extension_defines, torch_flags, torch_include
from .config import Settings
from .files import CUDA_SUFFIXES, SKIPPED_DIRS, decode_source, read_source, same_file
from .host_launch.occupancy import with_launch_occupancy
from .include_graph import IncludeGraph
from .model import (  # FileCheck, Includer: re-exported, defined with the other plain results
    CompileResult,
    Diagnostic,
    FileCheck,
    Includer,
    Severity,
    not_checked_in_time,
    ran_out_of_memory,
)
from .source import find_kernels

if TYPE_CHECKING:
    from .spec import Spec


def job_deadline(settings: Settings) -> float:
    """How long one file's check may run in its worker: `checkTimeoutSeconds`; where the user
    raised nvcc's own limit (`compileTimeoutSeconds`, KERNEL_LSP_NVCC_TIMEOUT_S) past it, long
    enough for that limit on each arch, twice (a header is compiled again in its includer's
    context), and a margin."""
    from .compile import nvcc

    raised = settings.compile_timeout_s or (
        nvcc.NVCC_TIMEOUT_S if "KERNEL_LSP_NVCC_TIMEOUT_S" in os.environ else None
    )
    base = float(settings.check_timeout_s or JOB_TIMEOUT_S)
    if raised is None:
        return base
    return max(base, raised * 2 * len(settings.archs()) + 30)


def merge_arch_diagnostics(results: list[CompileResult]) -> list[Diagnostic]:
    """One list for all archs; a finding seen for only some archs names them, unless those are
    the archs whose compile ran the host pass (it runs once, and says the same for every arch)."""
    seen: dict[tuple, tuple[Diagnostic, list[str]]] = {}
    for r in results:
        for d in r.diagnostics:
            key = (d.path, d.line, d.col, d.severity, d.message, d.code)
            if key in seen:
                seen[key][1].append(r.arch)
            else:
                seen[key] = (d, [r.arch])
    host_pass = [r.arch for r in results if r.host_pass]
    out = []
    for d, found_in in seen.values():
        if len(results) > 1 and len(found_in) < len(results) and d.code != "spill" and found_in != host_pass:
            d = replace(d, message=f"{d.message} [{', '.join(found_in)}]")
        out.append(d)
    return out


def check_source(
    source: str,
    path: str,
    settings: Settings,
    base_dir: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck:
    """`includers`: files that include this one (a header), best first; a header is compiled with
    the first one's flags when it has no compile_commands.json entry of its own, and a header
    that fails on its own is checked in its context (see `in_includer_context`)."""
    check = compile_all_archs(
        source, path, settings, base_dir, project, _first(includers), launchers=includers
    )
    assert check is not None  # only the front end has nothing to say
    full = _with_file_findings(check, source, path, settings, base_dir, spec_text, includers)
    assert full is not None
    return full


def front_end_check(
    source: str,
    path: str,
    settings: Settings,
    base_dir: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck | None:
    """The first look at a file whose verdict may be nvcc's, for the editor while the full check
    runs: NVRTC's findings or nvcc's front end's for the first arch (compile_front_end), with the
    file's other findings (launch comments, spec). None when there is nothing quicker to say than
    the full check (NVRTC answers alone)."""
    check = compile_all_archs(source, path, settings, base_dir, project, _first(includers), front_end=True)
    if check is None:
        return None
    return _with_file_findings(check, source, path, settings, base_dir, spec_text, includers, front_end=True)


def _first(includers: tuple[Includer, ...]) -> str | None:
    return includers[0][0] if includers else None


def _with_file_findings(
    check: FileCheck,
    source: str,
    path: str,
    settings: Settings,
    base_dir: str | None,
    spec_text: str | None,
    includers: tuple[Includer, ...],
    front_end: bool = False,
) -> FileCheck | None:
    if "kernel-lsp:" in source:
        from .launch_check import launch_findings

        check.diagnostics += launch_findings(
            source, path, [r.arch for r in check.results] or settings.archs(), settings.defines
        )
    if path.endswith(".cu"):
        report_phase(SPEC_PHASE)  # a deadline reached from here on is the spec's
        check.diagnostics += spec_findings(
            path, source, settings.defines, spec_text, settings.runs_specs, check.results
        )
    elif includers and check.errors:
        # None: the includer's front end has nothing quick to say, and the header's lone errors
        # may be only that it needs its includer: no first look rather than a false one.
        return in_includer_context(check, source, includers[0], settings, base_dir, front_end)
    return check


@dataclass(frozen=True)
class FileFlags:
    """A file's project flags: compile_commands.json's entry, plus PyTorch's folders for an
    extension. `problems`: warnings for the top of the file (a database that cannot be used);
    `blocking`: a finding that stops the compile (torch's headers not found)."""

    flags: CommandFlags | None
    problems: tuple[Diagnostic, ...] = ()
    blocking: Diagnostic | None = None


def file_options(
    path: str,
    source: str,
    settings: Settings,
    base_dir: str | None = None,
    project: Lookup | None = None,
    includer: str | None = None,
) -> tuple[FileFlags, list[CompileOptions]]:
    """The one recipe of a file's options, for every front end (the Workspace's compile options,
    the checks): its project flags (a header's from its includer, `file_flags`), the archs those
    and the settings name, and the CompileOptions for each, first arch first."""
    found = file_flags(path, source, settings, base_dir, project, includer)
    flags = found.flags
    return found, [settings.compile_options(arch, base_dir, flags) for arch in settings.archs(flags)]


def file_flags(
    path: str,
    source: str,
    settings: Settings,
    base_dir: str | None = None,
    project: Lookup | None = None,
    includer: str | None = None,
) -> FileFlags:
    """The project flags `path` compiles with (every front end gets its flags here). `project`:
    its database lookup, when the caller has it (a worker that read a 300,000-entry database
    itself took seconds and 400 MB). A file without an entry of its own (a header) takes
    `includer`'s."""
    project = project if project is not None else settings.project_flags(path, base_dir)
    if includer is not None and (project.flags is None or project.borrowed):
        from_includer = settings.project_flags(includer, base_dir)
        if from_includer.flags is not None and not from_includer.borrowed:
            project = from_includer
    flags = project.flags
    problems: tuple[Diagnostic, ...] = ()
    if project.problem:
        message = f"{project.problem}; checking with the settings' flags only"
        problems = (
            Diagnostic(path, 1, 1, Severity.WARNING, message, code="compile-commands", source="kernel-lsp"),
        )
    if (include := torch_include(source)) is not None:
        # A PyTorch extension: torch's headers and the Python headers, or one finding at the include.
        # A database whose folders hold torch's headers is the build's own word: no torch asked.
        if flags is not None and torch_ext.found_in(include, flags.include_dirs + flags.system_include_dirs):
            named = {macro_name(d) for d in flags.defines}
            extension = tuple(d for d in extension_defines(path) if macro_name(d) not in named)
            return FileFlags(replace(flags, defines=extension + flags.defines), problems)
        torch = torch_flags()
        if torch.problem:
            found = Diagnostic(
                path, include.line, 1, Severity.WARNING, torch.problem, code="torch", source="kernel-lsp"
            )
            return FileFlags(flags, problems, found)
        base = flags or CommandFlags()
        flags = replace(
            base,
            system_include_dirs=base.system_include_dirs + torch.system_include_dirs,
            defines=extension_defines(path) + base.defines,
        )
    return FileFlags(flags, problems)


def compile_all_archs(
    source: str,
    path: str,
    settings: Settings,
    base_dir: str | None = None,
    project: Lookup | None = None,
    includer: str | None = None,
    front_end: bool = False,
    launchers: tuple[Includer, ...] = (),
) -> FileCheck | None:
    """The file compiled for every arch with its project's flags (compile_commands.json) and the
    settings; a database that cannot be used is one warning at the top of the file. A file
    without an entry of its own (a header) takes `includer`'s. `front_end`: the first look for the
    first arch only (compile_front_end; None when there is none). `launchers`: files that include
    this one, whose launches give the block of a kernel it defines and does not launch itself."""
    found, options = file_options(path, source, settings, base_dir, project, includer)
    if found.blocking is not None:
        return FileCheck(path, [found.blocking], checked=False)
    if front_end:
        first = compile_front_end(source, path, options[0])
        if first is None or first.stage == SKIPPED or first.cancelled:
            return None
        results = [first]
    else:
        # Occupancy at the block sizes the file's own launches use (host code, __launch_bounds__),
        # else, for a header's kernel, those of a file that includes it. The host pass, where the
        # build has one, with the first arch only: it is the same for all.
        texts = functools.cache(lambda: launcher_texts(launchers, settings.max_file_bytes))
        results = [
            with_launch_occupancy(compile_source(source, path, o), source, o.defines, o.include_dirs, texts)
            for o in [options[0], *(o.device_pass_only() for o in options[1:])]
        ]
    diagnostics = merge_arch_diagnostics(results)
    if not path.endswith(".cu"):
        diagnostics = [d for d in diagnostics if not _alone_artifact(d, path)]
    return FileCheck(path, [*found.problems, *diagnostics], results)


def launcher_texts(includers: tuple[Includer, ...], max_bytes: int) -> list[tuple[str, str]]:
    """(path, text) of each includer: the editor's text, else the file's (unreadable ones left out)."""
    out = []
    for path, text in includers:
        if text is None:
            text, _ = read_source(path, max_bytes)
        if text is not None:
            out.append((path, text))
    return out


def _alone_artifact(d: Diagnostic, header: str) -> bool:
    """A finding that only says the header was compiled as a file of its own: the host compiler's
    `#pragma once in main file` (nvcc hands it the header as the main file)."""
    return d.message.strip() == "#pragma once in main file" and same_file(d.path, header)


def in_includer_context(
    alone: FileCheck,
    source: str,
    includer: Includer,
    settings: Settings,
    base_dir: str | None = None,
    front_end: bool = False,
) -> FileCheck | None:
    """A header that fails on its own (its types, macros or includes come from the file that
    includes it) is compiled as the includer sees it: the header's findings are those of the
    includer's compile that lie in the header, exactly as the compiler reports them there, and its
    kernels are the includer's kernels defined in the header. The includer's own findings stay
    the includer's (its own check reports them). When the includer fails by itself and shows
    nothing in the header, its compile says nothing about the header: the lone check stands.
    `front_end`: the includer's front end only (None when NVRTC compiles it: no quick answer)."""
    includer_path, includer_text = includer
    if includer_text is None:
        includer_text, _ = read_source(includer_path, settings.max_file_bytes)
    if includer_text is None:
        return alone
    context = compile_all_archs(includer_text, includer_path, settings, base_dir, front_end=front_end)
    if context is None:
        return None
    mine = [d for d in context.diagnostics if same_file(d.path, alone.path)]
    includer_errors = sum(1 for d in context.diagnostics if d.severity == Severity.ERROR and d not in mine)
    if includer_errors and not any(d.severity == Severity.ERROR for d in mine):
        return alone
    if _errors(mine) == _errors(alone.diagnostics):
        return alone  # the header's own mistake, whoever includes it: no context to speak of
    shown = os.path.relpath(includer_path, os.path.dirname(os.path.abspath(alone.path)))
    first = next(d for d in alone.diagnostics if d.severity == Severity.ERROR)
    note = Diagnostic(
        alone.path,
        1,
        1,
        Severity.INFO,
        f"checked as included by {shown}: on its own this header does not compile "
        f"(line {first.line}: {first.message})",
        code="context",
        source="kernel-lsp",
    )
    mine = [replace(d, path=alone.path) for d in mine]
    lines = {k.name: k.line for k in find_kernels(source)}
    results = [
        replace(
            r,
            path=alone.path,
            diagnostics=[d for d in r.diagnostics if same_file(d.path, alone.path)],
            kernels=[
                replace(
                    k,
                    line=k.defined_at
                    if k.defined_in and same_file(k.defined_in, alone.path)
                    else lines[_base_name(k.name)],
                    defined_in="",
                    defined_at=0,
                )
                for k in r.kernels
                if _base_name(k.name) in lines
            ],
        )
        for r in context.results
    ]
    return FileCheck(alone.path, [note, *mine], results)


def _errors(diagnostics: list[Diagnostic]) -> set[tuple[int, int, str]]:
    return {(d.line, d.col, d.message) for d in diagnostics if d.severity == Severity.ERROR}


def _base_name(kernel: str) -> str:
    """`total<float>` -> `total`; `ns::k` -> `k` (find_kernels knows names as written)."""
    return kernel.split("<", 1)[0].split("(", 1)[0].rsplit("::", 1)[-1].strip()


def spec_findings(
    path: str,
    source: str,
    defines: tuple[str, ...] = (),
    spec_text: str | None = None,
    run: bool = True,
    artifacts: list[CompileResult] | tuple[CompileResult, ...] = (),
) -> list[Diagnostic]:
    """What is wrong with the kernel file's spec sidecar (it raises, it disagrees with the
    kernels' signatures, launches (launch lines, else the host code's), compiled instances or the
    launcher's buffers, or its inputs and reference fail their dry run on the CPU), at its line in
    the spec; no GPU needed. Loading runs the user's spec, so the server calls this in a compile
    worker, never on its event loop. `spec_text`: the spec's unsaved editor text, when there is
    one. `run` False: the spec is the workspace's code and nobody asked for it to run here: it is
    only read (spec/static.py), and not dry-run. `artifacts`: the file's compiles, whose kernels
    say which template instances exist."""
    from .host_entry import entry_abi, find_host_function
    from .host_launch.spec_launch import with_host_launches
    from .source import find_kernel, find_kernels, parse_directives
    from .spec import check_entry_spec, check_spec, load_specs, source_constants, spec_path_for

    spec_path = spec_path_for(path)
    if spec_text is None and not os.path.exists(spec_path):
        return []
    if not run:
        from .spec.static import read_spec_statically

        if spec_text is None:
            spec_text, problem = read_source(spec_path)
            if spec_text is None:
                return [problem] if problem else []
        return read_spec_statically(spec_path, spec_text, find_kernels(source))
    loaded = load_specs(spec_path, spec_text)
    found = list(loaded.diagnostics)
    dry_key = _dry_run_key(spec_path, spec_text)
    if loaded.ok:
        kernels, directives = find_kernels(source), parse_directives(source)
        constants = source_constants(source, defines)
        compiled = next((r for r in artifacts if r.ok and r.kernels), None)
        for spec in loaded.specs:
            if spec.is_entry:  # a host function, not kernels: its C signature against args
                function = find_host_function(source, spec.entry or spec.kernel)
                found += check_entry_spec(spec, function, entry_abi(function) if function else None)
                found += _dry_run_once(spec, dry_key)
                continue
            launches = with_host_launches(directives, source, spec.kernels, defines, path)
            found += check_spec(spec, kernels, launches, constants)
            if compiled is not None:
                found += _instance_findings(
                    spec, [k for k in spec.kernels if find_kernel(kernels, k)], compiled
                )
            found += _one_buffer_findings(spec, kernels, source, defines)
            found += _dry_run_once(spec, dry_key)  # `run` is the gate: it runs the spec
    return found


# The dry run's findings, kept per spec (its text and the Python files beside it): it depends on
# the spec alone, and a save of the kernel file need not run it again (stencil3d's reference
# takes 42 ms on the CPU, a third of that file's NVRTC save).
_DRY_RUNS: dict[tuple[object, ...], list[Diagnostic]] = {}
_DRY_RUNS_KEPT = 64


def _dry_run_key(spec_path: str, spec_text: str | None) -> tuple[object, ...] | None:
    """What a spec's dry run depends on that can be seen: its text (the editor's, else the
    file's) and the size and time of each Python file beside it (modules it may import)."""
    if spec_text is None:
        spec_text, _ = read_source(spec_path)  # a regular file only (never a FIFO's wait)
        if spec_text is None:
            return None
    try:
        text = spec_text.encode("utf-8", "surrogatepass")
        folder, own = os.path.split(os.path.abspath(spec_path))
        beside = []
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.endswith(".py") and e.name != own and e.is_file():
                    st = e.stat()
                    beside.append((e.name, st.st_mtime_ns, st.st_size))
    except OSError:
        return None
    return (os.path.abspath(spec_path), hashlib.sha256(text).hexdigest(), tuple(sorted(beside)))


def _dry_run_once(spec: Spec, key: tuple[object, ...] | None) -> list[Diagnostic]:
    """`spec`'s dry run (spec/dry_run.py), or its findings of the last time its key was seen."""
    from .spec.dry_run import dry_run as run_dry

    if key is None:
        return run_dry(spec)
    full = (*key, spec.title)
    found = _DRY_RUNS.get(full)
    if found is None:
        found = run_dry(spec)
        if len(_DRY_RUNS) >= _DRY_RUNS_KEPT:
            _DRY_RUNS.pop(next(iter(_DRY_RUNS)))
        _DRY_RUNS[full] = found
    return list(found)


def _one_buffer_findings(spec, kernels, source: str, defines: tuple[str, ...]) -> list[Diagnostic]:
    """Two arguments that the file's launcher passes one buffer as (`rms` to one kernel, `d_rms`
    to the next) but the spec declares as two buffers: the second kernel would read a buffer of
    its own, and every element would come out wrong on the GPU. At the second one's line."""
    from .host_launch.launcher import launcher_for, one_buffer_names
    from .host_launch.occupancy import host_code
    from .source import find_kernel
    from .spec import SPEC_SOURCE, Alias, Scalar

    fn = launcher_for(host_code(source, tuple(defines)), spec.kernels)
    if fn is None:
        return []
    sigs = [s for s in (find_kernel(kernels, k) for k in spec.kernels) if s is not None]
    pointers = {p.name for sig in sigs for p in sig.params if p.is_pointer}
    out = []
    for name, first in one_buffer_names(fn, spec.kernels, pointers).items():
        arg, other = spec.args.get(name), spec.args.get(first)
        if (
            arg is None
            or other is None
            or isinstance(arg, (Alias, Scalar))
            or isinstance(other, (Alias, Scalar))
        ):
            continue
        message = (
            f"`{name}` and `{first}` are one buffer: `{fn.name}` passes the same variable as both; "
            f'declare "{name}": Alias("{first}")'
        )
        line = getattr(arg, "line", 0) or spec.line
        out.append(
            Diagnostic(
                spec.path, max(1, line), 1, Severity.ERROR, message, code="spec-args", source=SPEC_SOURCE
            )
        )
    return out


def _instance_findings(spec, names: list[str], compiled: CompileResult) -> list[Diagnostic]:
    """The spec's kernels that the file defines but its compile lacks (a template instance the
    file does not instantiate, one named other than the compiler names it), as the GPU check
    would say, at the Spec( line."""
    from .evaluation.specs import kernel_symbols
    from .spec import SPEC_SOURCE

    _, problems = kernel_symbols(compiled, names)
    return [
        Diagnostic(spec.path, max(1, spec.line), 1, Severity.ERROR, m, code="spec-kernel", source=SPEC_SOURCE)
        for m in problems
    ]


def check_bytes(
    data: bytes,
    path: str,
    settings: Settings,
    base_dir: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck:
    source, problem = decode_source(data, path, settings.max_file_bytes)
    if source is None:
        return FileCheck(path, [problem] if problem else [], checked=False)
    return _with_note(check_source(source, path, settings, base_dir, spec_text, includers, project), problem)


def check_path(
    path: str,
    settings: Settings,
    base_dir: str | None = None,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck:
    source, problem = read_source(path, settings.max_file_bytes)
    if source is None:
        return FileCheck(path, [problem] if problem else [], checked=False, missing=not os.path.exists(path))
    return _with_note(check_source(source, path, settings, base_dir, spec_text, includers, project), problem)


CHECK_TIMEOUT_SETTING = "checkTimeoutSeconds"
MEMORY_SETTING = "compileMemoryMB"


def failed_check(path: str, failure: JobFailed, settings: Settings) -> FileCheck:
    """What a file's check that did not finish in its worker says, the same in the server and
    the CLI: never a verdict on the code (a deadline or the memory limit is "not checked",
    information), except where the file's spec was running (its loop is the user's to fix).
    `checked` is False, so that it is never cached."""
    from .spec import spec_path_for

    spec = spec_path_for(path)
    has_spec = path.endswith(".cu") and os.path.exists(spec)
    name = os.path.basename(path)
    if failure.reason == "timeout" and failure.phase == SPEC_PHASE and has_spec:
        message = (
            f"{os.path.basename(spec)} did not return within {failure.seconds:g} s while {name} was checked, "
            f"and was stopped: does it (or something it imports) loop or wait forever? ({CHECK_TIMEOUT_SETTING})"
        )
        found = Diagnostic(spec, 1, 1, Severity.ERROR, message, code="timeout", source="kernel-lsp")
    elif failure.reason == "timeout":
        found = not_checked_in_time(path, failure.seconds, CHECK_TIMEOUT_SETTING, "the compile")
    elif failure.out_of_memory and failure.phase != SPEC_PHASE:
        found = ran_out_of_memory(path, settings.compile_memory_bytes, MEMORY_SETTING, failure.detail)
    elif failure.reason == "crashed":
        where = spec if failure.phase == SPEC_PHASE and has_spec else path
        culprit = "its spec" if where == spec else "the compiler"
        message = f"the process checking {name} ended ({failure.detail}): {culprit} crashed it"
        if where == path and _maybe_memory(failure, settings):
            message += f"; it ran under a memory limit of {settings.compile_memory_mb} MiB ({MEMORY_SETTING}), which may be why"
        found = Diagnostic(where, 1, 1, Severity.ERROR, message, code="crash", source="kernel-lsp")
    elif failure.reason == "closed":
        return FileCheck(path, [], checked=False)
    else:
        message = f"kernel-lsp failed while checking {name}: {failure.detail}"
        found = Diagnostic(path, 1, 1, Severity.ERROR, message, code="internal", source="kernel-lsp")
    return FileCheck(path, [found], checked=False)


def _maybe_memory(failure: JobFailed, settings: Settings) -> bool:
    """An abort while compiling under a memory limit: an allocation the limit refused ends some
    compilers that way without a word."""
    return settings.compile_memory_mb > 0 and failure.detail.startswith(
        ("killed by SIGABRT", "killed by SIGSEGV")
    )


def project_include_dirs(settings: Settings, folders: list[str]) -> tuple[str, ...]:
    """The include folders of every entry of the compile_commands.json that governs each folder
    (for the include graph, which resolves `#include`s without a file's own flags)."""
    out: dict[str, None] = {}
    for folder in folders:
        db = governing_database(os.path.join(folder, "_"), settings, folder)
        for flags in db.distinct_flags() if db else ():
            out.update(dict.fromkeys(flags.include_dirs))
    return tuple(out)


def governing_database(path: str, settings: Settings, base_dir: str | None = None) -> Database | None:
    """The database that governs `path` (None when there is none)."""
    if settings.compile_commands:
        db_path = explicit_database(settings.compile_commands, base_dir)[0]
    else:
        db_path = find_database(path)
    return load_database(db_path, settings.compile_commands_max_bytes) if db_path else None


def database_entries(path: str, settings: Settings, base_dir: str | None = None) -> list[CommandFlags]:
    """Every entry of the database that governs `path` (none when it is missing or broken)."""
    db = governing_database(path, settings, base_dir)
    return db.all_flags() if db else []


def includers_for(files: list[str], settings: Settings) -> dict[str, tuple[Includer, ...]]:
    """For each header among `files`: the file to check it in the context of. Candidates are the
    `.cu` files checked with it, else the translation units of its compile_commands.json."""
    headers = [f for f in files if not f.endswith(".cu")]
    if not headers:
        return {}
    units = [f for f in files if f.endswith(".cu")]
    out: dict[str, tuple[Includer, ...]] = {}
    graphs: dict[tuple, IncludeGraph] = {}  # headers of one project share one scan
    for header in headers:
        entries = database_entries(header, settings)
        candidates = units or [e.file for e in entries if e.file.endswith(".cu") and os.path.isfile(e.file)]
        dirs = tuple(dict.fromkeys((*settings.include_dirs, *(d for e in entries for d in e.include_dirs))))
        graph = graphs.get((dirs, tuple(candidates)))
        if graph is None:
            graph = graphs[(dirs, tuple(candidates))] = IncludeGraph(dirs)
            for unit in candidates:
                graph.update(unit)
        if found := includers_in(graph, header):
            out[header] = tuple((p, None) for p in found)
    return out


# A header's includers a check considers: the first is its context (`in_includer_context`), and
# the first that launches a kernel the header defines gives that kernel's block.
INCLUDERS_CONSIDERED = 8


def rank_includers(header: str, dependents: set[str]) -> list[str]:
    """The files to check a header in: `.cu` files first (a translation unit, not another header),
    nearest to the header's folder first, then by path, so the choice is stable."""
    folder = os.path.dirname(os.path.abspath(header))

    def distance(p: str) -> int:
        return len(os.path.relpath(os.path.dirname(p), folder).split(os.sep))

    return sorted(dependents, key=lambda p: (not p.endswith(".cu"), distance(p), p))


def includers_in(graph: IncludeGraph, header: str, limit: int | None = INCLUDERS_CONSIDERED) -> list[str]:
    """The `.cu` files of `graph` that include `header`, directly or not, in `rank_includers`'
    order, at most `limit` (None: all): what a header is checked through, in every front end."""
    ranked = rank_includers(header, {f for f in graph.dependents(header) if f.endswith(".cu")})
    return ranked if limit is None else ranked[:limit]


def _with_note(check: FileCheck, note: Diagnostic | None) -> FileCheck:
    """The reader's note about a file it repaired (not UTF-8) goes first in the file's findings."""
    if note is not None:
        check.diagnostics.insert(0, note)
    return check


def _excluded(path: str, exclude: tuple[str, ...]) -> bool:
    full = os.path.abspath(path)
    return any(fnmatch.fnmatch(full, pattern) for pattern in exclude)


def _excluded_here_or_above(path: str, exclude: tuple[str, ...]) -> bool:
    """A named file is excluded when it or a folder above it matches (`exclude = ["legacy"]`
    holds for `legacy/error.cu` that pre-commit names)."""
    d = os.path.abspath(path)
    while True:
        if _excluded(d, exclude):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


@dataclass
class FileSelection:
    files: list[str] = field(default_factory=list)  # what to check, each once, in order
    missing: list[str] = field(default_factory=list)  # named paths that do not exist
    not_cuda: list[str] = field(default_factory=list)  # named files that are not .cu/.cuh
    excluded: list[str] = field(default_factory=list)  # named files that `exclude` matches


def collect_files(
    paths: list[str], exclude: tuple[str, ...] = (), force_exclude: bool = False
) -> FileSelection:
    """CUDA files under `paths` (folders recursively, sorted), each once however often named.
    `exclude` (absolute glob patterns) applies to what the walk finds; with `force_exclude` (ruff's
    convention, which the pre-commit hook passes: it names files and its users expect the
    project's excludes to hold) also to the files named. A folder named is always walked, so
    `--check samples/broken` still checks a folder that `samples/` skips."""
    found: list[str] = []
    selection = FileSelection()
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if not d.startswith(".")
                    and d not in SKIPPED_DIRS
                    and not _excluded(os.path.join(root, d), exclude)
                )
                found += [
                    os.path.join(root, n)
                    for n in sorted(names)
                    if n.endswith(CUDA_SUFFIXES) and not _excluded(os.path.join(root, n), exclude)
                ]
        elif os.path.exists(p):  # a file (a FIFO or a device too: its check says what it is)
            if not p.endswith(CUDA_SUFFIXES):
                selection.not_cuda.append(p)
            elif force_exclude and _excluded_here_or_above(p, exclude):
                selection.excluded.append(p)
            else:
                found.append(p)
        else:
            selection.missing.append(p)
    seen: set[str] = set()
    for f in found:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            selection.files.append(f)
    return selection


def unknown_codes(selectors: list[str]) -> list[str]:
    """The selectors of `--select`/`--ignore` that can match no finding: a name no code starts
    with, and a number the compiler has no diagnostic for (`9999`: NVRTC's front end says so)."""
    names = set(unknown_selectors(selectors))
    return [
        s
        for s in selectors
        if s in names or ((n := number_of(s)) is not None and not known_diagnostic_number(n))
    ]


def awaiting_gpu(checks: list[FileCheck]) -> list[FileCheck]:
    """The files whose spec'd kernels a GPU would verify: compiled cleanly and have a spec."""
    from .spec import spec_path_for

    return [c for c in checks if c.checked and not c.errors and os.path.exists(spec_path_for(c.path))]


def mark_unverified(checks: list[FileCheck], reason: str) -> None:
    """Say on each file that has a spec that its kernels were not verified, and why, so that a
    compile-only run is never mistaken for a verified one."""
    for c in awaiting_gpu(checks):
        c.unverified = reason
