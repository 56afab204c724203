"""Checking a spec against the kernels it describes (parameters, dtypes, launch lines)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Diagnostic, Severity
from ..source import Directives, KernelSignature, find_kernel
from .dtypes import DTYPES, c_type_dtype
from .expressions import SpecError, launch_dims
from .loading import _diag
from .model import InOut, Out, Scalar, Spec, case_label


def check_spec(
    spec: Spec,
    signature: KernelSignature | Sequence[KernelSignature],
    directives: Directives,
    constants: Mapping[str, int] | None = None,
) -> list[Diagnostic]:
    """Diagnostics (in the spec file) where the spec does not fit the kernel(s) it describes:
    missing or extra arguments, pointer vs scalar, dtype vs C type, a missing launch line, launch
    expressions that do not evaluate over the sizes."""
    p = spec.path
    sigs = [signature] if isinstance(signature, KernelSignature) else list(signature)
    out: list[Diagnostic] = []
    if not isinstance(spec.args, dict):
        return out
    used: set[str] = set()
    for kname in spec.kernels:
        sig = find_kernel(sigs, kname)
        if sig is None:
            out.append(_diag(p, spec.line, f"no kernel `{kname}` in the .cu file", "spec-kernel"))
            continue
        for param in sig.params:
            used.add(param.name)
            arg = spec.args.get(param.name)
            if arg is None:
                out.append(
                    _diag(
                        p,
                        spec.line,
                        f"`{kname}` parameter `{param.type} {param.name}` has no entry in args",
                        "spec-args",
                    )
                )
                continue
            line = getattr(arg, "line", 0) or spec.line
            if param.is_pointer and isinstance(arg, Scalar):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is a pointer ({param.type}) but declared Scalar",
                        "spec-args",
                    )
                )
                continue
            if not param.is_pointer and not isinstance(arg, Scalar):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is passed by value ({param.type}); declare it Scalar(...)",
                        "spec-args",
                    )
                )
                continue
            if getattr(arg, "dtype", None) not in DTYPES:
                continue
            want = c_type_dtype(param.type)
            if want is None and "<" in kname:
                pass  # a template instance's `T`: its type is the instance's argument
            elif want is None:
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}`: cannot tell the element type of `{param.type}`; "
                        f"make sure {arg.dtype} matches it",
                        "spec-dtype",
                        Severity.WARNING,
                    )
                )
            elif want != arg.dtype:
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is `{param.type}` ({want}) but the spec says {arg.dtype}",
                        "spec-dtype",
                    )
                )
            if param.is_pointer and param.is_const and isinstance(arg, (Out, InOut)):
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{param.name}` is a const pointer but declared {type(arg).__name__}",
                        "spec-args",
                        Severity.WARNING,
                    )
                )
    for name, arg in spec.args.items():
        if name not in used and sigs and all(find_kernel(sigs, k) for k in spec.kernels):
            out.append(
                _diag(
                    p,
                    getattr(arg, "line", 0) or spec.line,
                    f"`{name}` is not a parameter of {', '.join(spec.kernels)}",
                    "spec-args",
                )
            )
    # Launch lines: one per pipeline step, and their expressions must evaluate for every case.
    counts: dict[str, int] = {}
    all_sizes = spec.verification_sizes() + spec.timing_cases()
    for kname in spec.kernels:
        launches = directives.launches_of(kname)
        i = counts.get(kname, 0)
        counts[kname] = i + 1
        if i >= len(launches):
            host = directives.host_notes.get(kname)
            out.append(
                _diag(
                    p,
                    spec.line,
                    f"no `// kernel-lsp: launch {kname} grid=... block=...` line for `{kname}` "
                    f"in the .cu (needed {i + 1}, found {len(launches)})"
                    + (f", and its launch in host code cannot be used: {host}" if host else ""),
                    "spec-launch",
                )
            )
            continue
        d = launches[i]
        for sizes in all_sizes:
            try:
                launch_dims(d.grid, d.block, d.smem, {**(constants or {}), **sizes})
            except SpecError as e:
                out.append(
                    _diag(
                        p,
                        spec.line,
                        f"{d.described}: {e} (case {case_label(sizes)})",
                        "spec-launch",
                    )
                )
                break
    return out
