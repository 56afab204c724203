"""A compiler's log and output → the one compiled-artifact type every backend returns
(`CompileResult`: findings, per-kernel resources, CUBIN, the headers read)."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import replace

from .. import archs
from ..advice import INCLUDE_DIRS, library_advice, missing_package, nvidia_library
from ..constants import read_constants
from ..files import MAX_FILE_BYTES, read_text_prefix
from ..hostcode import find_host_code, host_code_message
from ..model import CompileResult, Diagnostic, KernelResources, Severity
from ..source import KernelSignature, find_includes, find_kernels, parse_directives
from .demangle import Demangled, demangle, fallback_name
from .includes import include_closure
from .logparse import parse_log, source_name
from .options import CompileOptions
from .stamped import by_stamp
from .toolchain import find_toolchain, site_packages
from .versions import nvcc_version, nvrtc_version


def _same_file(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def literal_launch_value(
    expr: str, defines: tuple[str, ...], source: str = ""
) -> int | tuple[int, ...] | None:
    """A launch expression's value when it needs no runtime size (`256`, `(16, 16)`, `BLOCK`),
    with the file's constants and -D values (kernel_lsp.constants; no `eval`)."""
    return read_constants(source, defines).evaluate(expr)


def _literal_block_size(expr: str, defines: tuple[str, ...], source: str = "") -> int | None:
    """The thread count of a launch's block expression when it needs no runtime size."""
    v = literal_launch_value(expr, defines, source)
    if isinstance(v, tuple):
        n = 1
        for x in v:
            n *= x
        return n
    return v


def _line_reader(source: str, path: str):
    """line_text(path, line) for the log parser: the compiled text for the file itself, disk for
    headers (read once each)."""
    files: dict[str, list[str]] = {os.path.abspath(path): source.splitlines()}

    def line_text(p: str, line: int) -> str | None:
        key = os.path.abspath(p)
        if key not in files:
            files[key] = (read_text_prefix(key, MAX_FILE_BYTES) or "").splitlines()
        lines = files[key]
        return lines[line - 1] if 0 < line <= len(lines) else None

    return line_text


def build_result(
    source: str,
    path: str,
    options: CompileOptions,
    ok: bool,
    log: str,
    cubin: bytes | None,
    backend: str = "nvrtc",
) -> CompileResult:
    parsed = parse_log(log, default_path=os.path.abspath(path), line_text=_line_reader(source, path))
    if backend != "nvrtc":  # the front end's findings are the backend's
        parsed.diagnostics = [
            replace(d, source=backend) if d.source == "nvrtc" else d for d in parsed.diagnostics
        ]
    headers = include_closure(source, path, options.include_dirs)
    diags: list[Diagnostic] = []
    for d in parsed.diagnostics:
        if _same_file(d.path, path):
            diags.append(replace(d, path=path))
            continue
        diags.append(d)
        # An error inside a header also shows at the #include line that leads to it.
        if d.severity >= Severity.WARNING:
            line, _ = headers.get(os.path.normpath(d.path), (None, None))
            if line is None:
                line, _ = _include_line_for(source, d.path)
            diags.append(
                Diagnostic(
                    path,
                    line or 1,
                    1,
                    d.severity,
                    f"in included header {os.path.basename(d.path)}:{d.line}:{d.col}: {d.message}",
                    code=d.code,
                    source=d.source,
                    end_col=0,
                    related=((d.path, d.line, d.col, d.message),),
                    header_copy=True,
                )
            )
    for message in parsed.option_errors:
        diags.append(
            Diagnostic(
                path,
                1,
                1,
                Severity.ERROR,
                f"{'nvcc' if backend == 'nvcc' else 'NVRTC'} rejected the invocation: {message}"
                + (f" (extra flags: {' '.join(options.extra)})" if options.extra else ""),
                code="option",
                source="kernel-lsp",
            )
        )
    diags = [_explain_missing_header(d, path, options, backend) for d in diags]

    if not ok and backend == "nvrtc":
        host = find_host_code(source)
        if host and not options.default_device:
            first = host[0]
            hidden = sum(1 for d in diags if d.severity == Severity.ERROR)
            message = host_code_message(host, _host_code_advice(options))
            if hidden:
                message += f" ({hidden} NVRTC error(s) hidden until then.)"
            diags = [
                Diagnostic(
                    path,
                    first.line,
                    first.col,
                    Severity.ERROR,
                    message,
                    code="host-code",
                    source="kernel-lsp",
                    related=tuple((path, u.line, u.col, u.what) for u in host[1:]),
                )
            ]
        elif not any(d.severity == Severity.ERROR for d in diags):
            diags.append(
                Diagnostic(
                    path,
                    1,
                    1,
                    Severity.ERROR,
                    "NVRTC failed without a message: " + log.strip()[:500],
                    code="nvrtc",
                    source="kernel-lsp",
                )
            )

    kernels = _kernel_resources(source, path, options, parsed.resources, headers)
    for k in kernels:
        if k.spills:
            diags.append(
                Diagnostic(
                    path,
                    k.line or 1,
                    1,
                    Severity.WARNING,
                    f"kernel `{k.qualified_name}` spills to local memory on {k.arch}: {k.spill_store_bytes} bytes "
                    f"spill stores, {k.spill_load_bytes} bytes spill loads",
                    code="spill",
                    source="kernel-lsp",
                )
            )
    # ptxas repeats --warn-on-spills as a line-less warning; the kernel's own diagnostic says more.
    diags = [d for d in diags if not (d.source == "ptxas" and "spill" in d.message.lower())]
    return CompileResult(
        path=path,
        arch=options.arch,
        ok=ok,
        diagnostics=diags,
        kernels=kernels,
        cubin=cubin,
        log=log,
        unparsed=parsed.unparsed,
        includes=sorted(headers),
        compiler=backend,
    )


def _host_code_advice(options: CompileOptions) -> str:
    """Why NVRTC got a file with host code: the setting, or the missing nvcc or host compiler."""
    if options.compiler == "nvrtc":
        return "The compiler setting is `nvrtc`; set it to `auto` or `nvcc` to compile host code with nvcc."
    problem = find_toolchain(options.extra).problem
    return f"nvcc would compile it, but {problem}." if problem else ""


def _include_line_for(source: str, header_path: str) -> tuple[int | None, str | None]:
    base = os.path.basename(header_path)
    for inc in find_includes(source):
        if os.path.basename(inc.target) == base:
            return inc.line, inc.target
    return None, None


# NVRTC and EDG: `cannot open source file "x.h"`; the host preprocessor: `x.h: No such file or directory`.
_MISSING_HEADER = re.compile(r'cannot open source file "([^"]+)"|^(\S+): No such file or directory$')


def _explain_missing_header(
    d: Diagnostic, path: str, options: CompileOptions, backend: str = "nvrtc"
) -> Diagnostic:
    missing = _MISSING_HEADER.search(d.message)
    if missing is None:
        return d
    header = missing.group(1) or missing.group(2)
    if nvidia_library(header) is not None:
        site = next(iter(site_packages()), "site-packages")
        major, installed_in = _cuda_major(backend, options), _installed_header_folder(header)
        advice = library_advice(header, major, installed_in, site)
        package = missing_package(header, major, installed_in)
        return replace(d, message=f"{d.message}; {advice}.", package=package)
    searched = [
        os.path.dirname(os.path.abspath(path)),
        *options.include_dirs,
        "CUDA headers (cudart, cccl)",
    ]
    return replace(
        d,
        message=f"{d.message}; searched: {', '.join(searched)}; {INCLUDE_DIRS}.",
    )


def _cuda_major(backend: str, options: CompileOptions) -> int | None:
    """The CUDA major version of the compiler that reported a missing header: its wheels are the
    ones to install (nvidia-cublas for 13, nvidia-cublas-cu12 for 12)."""
    if backend == "nvcc":
        nvcc = find_toolchain(options.extra).nvcc
        version = nvcc_version(nvcc) if nvcc else None
    else:
        version = nvrtc_version()
    major = (version or "").split(".")[0]
    return int(major) if major.isdigit() else None


def _installed_header_folder(header: str) -> str | None:
    """The folder of an installed NVIDIA wheel that holds `header`, in this interpreter's
    site-packages (where `pip install` put it), or None."""
    library = nvidia_library(header)
    if library is None:
        return None
    for root in site_packages():
        for folder in dict.fromkeys((library.folder, library.folder_cu12)):
            candidate = os.path.join(root, folder)
            if os.path.isfile(os.path.join(candidate, header)):
                return candidate
    return None


def _kernel_resources(
    source: str,
    path: str,
    options: CompileOptions,
    raw: list,
    headers: dict[str, tuple[int, str]] | None = None,
) -> list[KernelResources]:
    signatures = find_kernels(source)
    directives = parse_directives(source)
    out = []
    for r in raw:
        parts = demangle(r.mangled)
        # A symbol the demangler cannot read is `name<?>`: the raw symbol stays in `mangled`.
        function = parts.name if parts else source_name(r.mangled)
        sig = _definition_of(function, parts, signatures)
        line, defined_in, defined_at = (sig.line if sig else 0), "", 0
        if sig is None or not sig.definition:
            # A template the file only instantiates: its definition is in a header it includes.
            found = _header_definition(function, parts, headers or {})
            if found is not None:
                defined_in, defined_at = found
                if sig is None:  # no explicit instantiation here: the #include that leads to it
                    line = (headers or {})[defined_in][0]
            elif sig is None and parts is not None:
                # A library's kernel (CUB, Thrust): on the #include that brings the library in.
                line = _library_include_line(source, parts.qualified, headers or {})
        launches = directives.launches_of(function)
        block = _literal_block_size(launches[0].block, options.defines, source) if launches else None
        dyn = _literal_block_size(launches[0].smem, options.defines, source) if launches else 0
        occ = archs.occupancy(r.arch, block, r.registers, r.shared_bytes, dyn or 0) if block else None
        out.append(
            KernelResources(
                name=parts.instance if parts else fallback_name(r.mangled),
                mangled=r.mangled,
                arch=r.arch,
                registers=r.registers,
                shared_bytes=r.shared_bytes,
                stack_bytes=r.stack_bytes,
                spill_store_bytes=r.spill_store_bytes,
                spill_load_bytes=r.spill_load_bytes,
                barriers=r.barriers,
                const_bytes=r.const_bytes,
                line=line,
                block_size=block,
                occupancy=occ,
                function=function,
                defined_in=defined_in,
                defined_at=defined_at,
                scope=_scope(parts),
            )
        )
    out = _distinct_names(out)
    out.sort(key=lambda k: (k.line or 1 << 30, k.name))
    return out


def _scope(parts: Demangled | None) -> str:
    """`ops::detail` of `ops::detail::k<4>`: the namespaces and classes a user writes (an
    anonymous namespace, `(anonymous namespace)` to the demangler, is none of them)."""
    if parts is None or not parts.qualified.endswith("::" + parts.name):
        return ""
    # Cut at the name, not at every `::`: a class scope's template arguments hold some.
    scope = parts.qualified[: -len(parts.name) - 2]
    return _ANONYMOUS.sub("", scope).strip(":")


_ANONYMOUS = re.compile(r"(?:^|::)\(anonymous namespace\)(?=::|$)")


def _header_definition(
    function: str, parts: Demangled | None, headers: dict[str, tuple[int, str]]
) -> tuple[str, int] | None:
    """(header, line) of the definition of `function` among the user headers a file reads."""
    candidates: list[tuple[KernelSignature, str]] = []
    for header in headers:
        candidates += [(s, header) for s in _header_kernels(header) if s.name == function and s.definition]
    if not candidates:
        return None
    sig = _definition_of(function, parts, [s for s, _ in candidates])
    if sig is None:
        return None
    header = next(h for s, h in candidates if s is sig)
    return header, sig.line


def _library_include_line(source: str, qualified: str, headers: dict[str, tuple[int, str]]) -> int:
    """The line of the file's #include that reaches `<ns/...>` for the kernel's outermost
    namespace `ns` (`cub::...` -> `<cub/...>`), directly or through a user header; 0 if none."""
    namespace = qualified.split("::", 1)[0]
    if "::" not in qualified or not namespace.isidentifier():
        return 0
    prefix = namespace + "/"
    for inc in find_includes(source):
        if not inc.quoted and inc.target.startswith(prefix):
            return inc.line
    for header, (line, _) in sorted(headers.items(), key=lambda item: item[1][0]):
        if any(not i.quoted and i.target.startswith(prefix) for i in _scan_header(header)[1]):
            return line
    return 0


def _header_kernels(header: str) -> list[KernelSignature]:
    return _scan_header(header)[0]


@by_stamp(maxsize=512, missing=([], []))
def _scan_header(path: str) -> tuple[list[KernelSignature], list]:
    """The kernels a header declares and its #include lines, read once per version of the file
    (many files include it)."""
    text = read_text_prefix(path, MAX_FILE_BYTES)  # a regular file only: never a FIFO
    if text is None:
        return [], []
    return find_kernels(text), find_includes(text)


def _distinct_names(kernels: list[KernelResources]) -> list[KernelResources]:
    """Shared names get what tells them apart: the namespace (`a::k`, `b::k`), else the
    parameters (overloads: `relu(float*, int)`), else a number (`k<?> #2`); never the raw symbol,
    which stays in `mangled`."""

    def qualified(k: KernelResources, parts: Demangled) -> str:
        return parts.qualified + k.name[len(parts.name) :]

    def with_params(k: KernelResources, parts: Demangled) -> str:
        return f"{k.name}({', '.join(parts.params)})"

    for label in (qualified, with_params):
        groups: dict[str, list[int]] = {}
        for i, k in enumerate(kernels):
            groups.setdefault(k.name, []).append(i)
        for members in groups.values():
            if len(members) < 2:
                continue
            labels = {}
            for i in members:
                parts = demangle(kernels[i].mangled)
                if parts:
                    labels[i] = label(kernels[i], parts)
            # Only where the label tells every member apart (overloads share their namespace).
            if len(labels) == len(members) and len(set(labels.values())) == len(members):
                for i, name in labels.items():
                    kernels[i] = replace(kernels[i], name=name)
    shared = Counter(k.name for k in kernels)
    seen: Counter[str] = Counter()
    out = []
    for k in kernels:
        if shared[k.name] > 1:
            seen[k.name] += 1
            if seen[k.name] > 1:
                k = replace(k, name=f"{k.name} #{seen[k.name]}")
        out.append(k)
    return out


_TYPE_WORDS = {"unsigned": "unsigned int", "signed": "int", "long int": "long", "short int": "short"}


def _type_key(text: str) -> tuple[str, int]:
    """(base type without qualifiers or namespaces, pointer depth): what a demangled parameter
    and a source parameter have in common."""
    depth = text.count("*")
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|class)\b|[*&]", " ", text)
    base = " ".join(base.split())
    base = _TYPE_WORDS.get(base, base)
    return base.rsplit("::", 1)[-1], depth


def _definition_of(function: str, parts: Demangled | None, signatures: list[KernelSignature]):
    """The signature an entry symbol was compiled from: by name, then among several by namespace,
    template-ness and how many parameters agree with the source's (type and pointer depth)."""
    candidates = [s for s in signatures if s.name == function]
    if len(candidates) <= 1 or parts is None:
        return candidates[0] if candidates else None

    # The symbol's namespaces as the source writes them (no anonymous ones).
    scopes = parts.qualified.split("::")[:-1]
    namespace = "::".join(n for n in scopes if n and not n.startswith("("))

    def score(sig: KernelSignature) -> tuple:
        same = sum(_type_key(p.type) == _type_key(q) for p, q in zip(sig.params, parts.params, strict=False))
        return (
            sig.namespace == namespace,
            sig.templated == bool(parts.template_args),
            len(sig.params) == len(parts.params),
            same,
            sig.definition,
        )

    return max(candidates, key=score)
