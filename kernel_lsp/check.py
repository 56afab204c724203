"""Checks one file for every configured arch and merges the findings. Shared by the server, the
CLI and the watcher, so they agree on what a file's diagnostics are."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field

from .compile import compile_source, decode_source, read_source
from .config import Settings
from .model import CompileResult, Diagnostic, KernelResources, Severity

CUDA_SUFFIXES = (".cu", ".cuh")
SPEC_SUFFIX = ".spec.py"
SKIPPED_DIRS = frozenset({"node_modules", "build", "__pycache__", "dist", ".git"})


@dataclass
class FileCheck:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    results: list[CompileResult] = field(default_factory=list)
    checked: bool = True  # False: skipped (binary, too large, not UTF-8, gone)
    missing: bool = False  # the file no longer exists
    gpu_checks: list = field(default_factory=list)  # kernel_lsp.gpu.KernelCheck, when verified

    @property
    def kernels(self) -> list[KernelResources]:
        return [k for r in self.results for k in r.kernels]

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == Severity.WARNING)

    def result_for(self, arch: str) -> CompileResult | None:
        return next((r for r in self.results if r.arch == arch), None)


def spec_owners(spec_path: str) -> list[str]:
    """`dir/vadd.spec.py` -> the kernel files it checks (`dir/vadd.cu`, `dir/vadd.cuh`) that exist."""
    stem = spec_path[: -len(SPEC_SUFFIX)]
    return [stem + s for s in CUDA_SUFFIXES if os.path.isfile(stem + s)]


def drop_repeated(checks: list[FileCheck]) -> None:
    """A header's own findings appear once even when it is checked alone and through each file
    that includes it."""
    seen: set[tuple] = set()
    for c in checks:
        kept = []
        for d in c.diagnostics:
            key = (os.path.abspath(d.path), d.line, d.col, d.message) if not _same(d.path, c.path) else None
            if key is None or key not in seen:
                kept.append(d)
            if key:
                seen.add(key)
        c.diagnostics = kept
    # Then drop foreign copies of findings that the header's own check already reported.
    own = {
        (os.path.abspath(d.path), d.line, d.col, d.message)
        for c in checks
        for d in c.diagnostics
        if _same(d.path, c.path)
    }
    for c in checks:
        c.diagnostics = [
            d
            for d in c.diagnostics
            if _same(d.path, c.path) or (os.path.abspath(d.path), d.line, d.col, d.message) not in own
        ]


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def merge_arch_diagnostics(results: list[CompileResult]) -> list[Diagnostic]:
    """One list for all archs; a finding seen for only some archs names them."""
    seen: dict[tuple, tuple[Diagnostic, list[str]]] = {}
    for r in results:
        for d in r.diagnostics:
            key = (d.path, d.line, d.col, d.severity, d.message, d.code)
            if key in seen:
                seen[key][1].append(r.arch)
            else:
                seen[key] = (d, [r.arch])
    out = []
    for d, found_in in seen.values():
        if len(results) > 1 and len(found_in) < len(results) and d.code != "spill":
            d = Diagnostic(
                d.path,
                d.line,
                d.col,
                d.severity,
                f"{d.message} [{', '.join(found_in)}]",
                d.code,
                d.source,
                d.end_col,
                d.related,
            )
        out.append(d)
    return out


def check_source(
    source: str, path: str, settings: Settings, base_dir: str | None = None, spec_text: str | None = None
) -> FileCheck:
    results = [compile_source(source, path, settings.compile_options(a, base_dir)) for a in settings.archs()]
    diagnostics = merge_arch_diagnostics(results)
    if "kernel-lsp:" in source:
        from .launch_check import launch_findings

        diagnostics += launch_findings(source, path, settings.archs(), settings.defines)
    if path.endswith(".cu"):
        diagnostics += spec_findings(path, source, settings.defines, spec_text)
    return FileCheck(path, diagnostics, results)


def spec_findings(
    path: str, source: str, defines: tuple[str, ...] = (), spec_text: str | None = None
) -> list[Diagnostic]:
    """What is wrong with the kernel file's spec sidecar (it raises, or it disagrees with the
    kernels' signatures or launch lines), at its line in the spec; no GPU needed. Loading runs the
    user's spec, so the server calls this in a compile worker, never on its event loop.
    `spec_text`: the spec's unsaved editor text, when there is one."""
    from .source import find_kernels, parse_directives
    from .spec import check_spec, load_specs, source_constants, spec_path_for

    spec_path = spec_path_for(path)
    if spec_text is None and not os.path.exists(spec_path):
        return []
    loaded = load_specs(spec_path, spec_text)
    found = list(loaded.diagnostics)
    if loaded.ok:
        kernels, directives = find_kernels(source), parse_directives(source)
        constants = source_constants(source, defines)
        for spec in loaded.specs:
            found += check_spec(spec, kernels, directives, constants)
    return found


def check_bytes(
    data: bytes, path: str, settings: Settings, base_dir: str | None = None, spec_text: str | None = None
) -> FileCheck:
    source, problem = decode_source(data, path, settings.max_file_bytes)
    if source is None:
        return FileCheck(path, [problem] if problem else [], checked=False)
    return check_source(source, path, settings, base_dir, spec_text)


def check_path(
    path: str, settings: Settings, base_dir: str | None = None, spec_text: str | None = None
) -> FileCheck:
    source, problem = read_source(path, settings.max_file_bytes)
    if source is None:
        return FileCheck(path, [problem] if problem else [], checked=False, missing=not os.path.exists(path))
    return check_source(source, path, settings, base_dir, spec_text)


def _excluded(path: str, exclude: tuple[str, ...]) -> bool:
    full = os.path.abspath(path)
    return any(fnmatch.fnmatch(full, pattern) for pattern in exclude)


def collect_files(paths: list[str], exclude: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """CUDA files under `paths` (folders recursively, sorted), and the paths that do not exist.
    `exclude` (absolute glob patterns) applies to what the walk finds, not to the paths given,
    so `--check samples/broken` still checks a folder that `samples/` skips."""
    files, missing = [], []
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
                files += [
                    os.path.join(root, n)
                    for n in sorted(names)
                    if n.endswith(CUDA_SUFFIXES) and not _excluded(os.path.join(root, n), exclude)
                ]
        elif os.path.isfile(p):
            files.append(p)
        else:
            missing.append(p)
    return files, missing
