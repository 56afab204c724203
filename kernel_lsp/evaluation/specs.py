"""Spec resolution: from a source, its compiled artifact and a spec, the launch steps a backend
runs ([{kernel, symbol, params, grid, block, smem, constants}]), or for an entry spec the one
call of its host function from the built library (`entry_steps`). Pure: no GPU, no compiling.

A spec names a kernel by its source name (`saxpy`) or a template instance (`scale<float>`); the
entry symbol comes from the artifact's kernels (mangled names from the compiler's resource
report), with the CUBIN's string table as the fallback for plain names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from kernel_lsp.compile.demangle import demangle
from kernel_lsp.compile.shared_lib import LibraryBuild
from kernel_lsp.elf import Elf
from kernel_lsp.host_entry import entry_abi, find_host_function
from kernel_lsp.host_launch.spec_launch import with_host_launches
from kernel_lsp.model import CompileResult, Diagnostic, Severity
from kernel_lsp.runner.isolation import cubin_globals
from kernel_lsp.source import find_kernel, find_kernels, kernel_base_name, parse_directives
from kernel_lsp.spec import (
    Spec,
    SpecLoad,
    check_entry_spec,
    check_spec,
    source_constants,
    spec_path_for,
)
from kernel_lsp.spec.isolated import load_specs_isolated

GPU_SOURCE = "kernel-lsp gpu"
SpecArg = str | Spec | Sequence[Spec] | SpecLoad | None


def entry_symbols(cubin: bytes, names: Sequence[str]) -> dict[str, str]:
    """{source name: symbol} read from the CUBIN's string table: the name itself (extern "C") or
    its Itanium mangling `_Z<len><name>...` (a plain, non-template function)."""
    strings = [s.decode(errors="replace") for s in cubin.split(b"\0") if s]
    found: dict[str, str] = {}
    for name in names:
        prefix = f"_Z{len(name)}{name}"
        for text in strings:
            if text == name or (text.startswith(prefix) and text[len(prefix) :][:1].isalpha()):
                found[name] = text
                break
    return found


def instance_name(mangled: str) -> str | None:
    """`_Z5scaleIfEvPKT_S2_PS0_i` -> `scale<float>`: the template instance an entry symbol is
    (None for a plain function or a symbol the demangler does not read)."""
    d = demangle(mangled)
    return d.instance if d is not None and d.template_args else None


_INT_SUFFIX = re.compile(r"\b(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")


def _normal(name: str) -> str:
    """`ns::total< float >` -> `total<float>`, `k<256u>` -> `k<256>`: how two spellings of one
    instance compare (the demangler writes an unsigned template argument as `256u`)."""
    text = "".join(name.split())
    head, lt, args = text.partition("<")
    return head.rpartition("::")[2] + lt + _INT_SUFFIX.sub(r"\1", args)


def kernel_symbols(artifact: CompileResult, kernels: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """{spec kernel name: entry symbol} for the kernels found in the artifact, and a message per
    kernel that is not (absent, or a template with several instances and no instance named)."""
    # A backend may name an instance by its template only (`scale`): its symbol says which.
    by_name = {
        _normal(k.name if "<" in k.name else instance_name(k.mangled) or k.name): k.mangled
        for k in artifact.kernels
    }
    found: dict[str, str] = {}
    problems: list[str] = []
    for name in dict.fromkeys(kernels):
        symbol = by_name.get(_normal(name))
        if symbol is None and "<" not in name:
            instances = sorted(n for n in by_name if kernel_base_name(n) == name)
            if len(instances) == 1:
                symbol = by_name[instances[0]]
            elif len(instances) > 1:
                problems.append(
                    f"`{name}` is a template with {len(instances)} instances ({', '.join(instances)}): "
                    f'name one in the spec, e.g. kernel="{instances[0]}"'
                )
                continue
        if symbol is None and artifact.cubin and "<" not in name:
            # Some builds leave ptxas' resource lines out of the log: read the CUBIN itself.
            symbol = entry_symbols(artifact.cubin, [name]).get(name)
        if symbol is None:
            instances = sorted(
                n for n in by_name if "<" in n and kernel_base_name(n) == kernel_base_name(name)
            )
            if "<" in name and instances:
                problems.append(
                    f"no instance `{name}` in the compiled module (a template needs an explicit "
                    f"instantiation); the file instantiates {', '.join(instances)}: name one of "
                    f'them, e.g. kernel="{instances[0]}"'
                )
                continue
            problems.append(
                f"kernel `{name}` not in the compiled module"
                + (" (a template needs an explicit instantiation)" if "<" in name else "")
            )
            continue
        found[name] = symbol
    return found, problems


def resolve_spec(
    specs: SpecArg, path: str, kernel: str | None, spec_source: str | None
) -> tuple[Spec | None, list[Diagnostic]]:
    """The spec of `kernel` (the first one when None) from a spec path, a load, or specs."""
    if specs is None:
        specs = spec_path_for(path)
    if isinstance(specs, str):
        if spec_source is None and not os.path.exists(specs):
            return None, [
                Diagnostic(
                    path,
                    1,
                    1,
                    Severity.INFO,
                    f"no spec ({os.path.basename(specs)})",
                    code="no-spec",
                    source=GPU_SOURCE,
                )
            ]
        specs = load_specs_isolated(specs, spec_source)
    if isinstance(specs, SpecLoad):
        errors = [d for d in specs.diagnostics if d.severity is Severity.ERROR]
        if errors:
            return None, errors
        candidates = specs.specs
    elif isinstance(specs, Spec):
        candidates = [specs]
    else:
        candidates = list(specs)
    for spec in candidates:
        if kernel in (None, spec.kernel, spec.name):
            return spec, []
    return None, [
        Diagnostic(
            path, 1, 1, Severity.INFO, f"no spec for kernel `{kernel}`", code="no-spec", source=GPU_SOURCE
        )
    ]


def launch_steps(
    spec: Spec, source: str, artifact: CompileResult, defines: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """The pipeline's launch steps, or the diagnostics (in the spec file) that prevent them."""
    sigs = find_kernels(source)
    # A kernel without a launch comment runs as the file's host code launches it.
    directives = with_host_launches(parse_directives(source), source, spec.kernels, defines, artifact.path)
    constants = source_constants(source, defines)
    problems = [d for d in check_spec(spec, sigs, directives, constants) if d.severity is Severity.ERROR]
    if problems:
        return [], problems
    symbols, missing = kernel_symbols(artifact, spec.kernels)
    if missing:
        return [], [
            Diagnostic(
                spec.path or "", spec.line or 1, 1, Severity.ERROR, m, code="spec-kernel", source=GPU_SOURCE
            )
            for m in missing
        ]
    steps: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for kname in spec.kernels:
        i = seen.get(kname, 0)
        seen[kname] = i + 1
        d = directives.launches_of(kname)[i]
        sig = find_kernel(sigs, kname)
        assert sig is not None  # check_spec reported it otherwise
        steps.append(
            {
                "kernel": kname,
                "symbol": symbols[kname],
                "params": [p.name for p in sig.params],
                "grid": d.grid,
                "block": d.block,
                "smem": d.smem,
                "constants": constants,
            }
        )
    return steps, []


def spec_desc(spec: Spec, spec_source: str | None) -> dict[str, Any]:
    """How the worker finds the spec: its path, and the editor's text when it is open."""
    if not spec.path:
        raise ValueError("the spec must come from a spec file (load_specs sets its path)")
    return {"path": spec.path, "source": spec_source, "kernel": spec.kernel}


def entry_steps(
    spec: Spec, source: str, build: LibraryBuild
) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """The one step of an entry spec ({kind: entry, kernel, symbol, params, codes, returns,
    globals, trusted, kernels}), or the diagnostics (in the spec file) that prevent it."""
    function = find_host_function(source, spec.entry or spec.kernel)
    abi = entry_abi(function) if function is not None else None
    problems = [d for d in check_entry_spec(spec, function, abi) if d.severity is Severity.ERROR]
    if problems or function is None or abi is None:
        return [], problems
    name = function.name
    library = build.library or b""
    exported = {s.name for s in Elf(library).symbols(dynamic=True) if not s.undefined} if library else set()
    symbol = name if name in exported else entry_symbols(library, [name]).get(name)
    if symbol is None or symbol not in exported:
        message = f"`{name}` is not exported by the built library"
        if not function.extern_c:
            message += ' (declare it extern "C", or make sure it is not static or inline)'
        return [], [
            Diagnostic(
                spec.path or "",
                spec.line or 1,
                1,
                Severity.ERROR,
                message,
                code="spec-entry",
                source=GPU_SOURCE,
            )
        ]
    step = {
        "kind": "entry",
        "kernel": spec.kernel,
        "symbol": symbol,
        "params": [a.name for a in abi.args],
        "codes": [a.code for a in abi.args],
        "returns": abi.returns,
        "globals": cubin_globals(build.result.cubin or b""),
        "trusted": build.trusted,
        "kernels": {k.mangled: k.name for k in build.result.kernels},
    }
    return [step], []
