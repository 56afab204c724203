"""Checking a spec against the kernels it describes (parameters, dtypes, launch lines), or against
the host function an entry spec names (kernel_lsp/host_entry.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Diagnostic, Severity
from ..source import Directives, KernelSignature, Param, find_kernel
from .dtypes import DTYPES, c_type_dtype
from .expressions import SpecError, launch_dims
from .loading import _diag
from .model import Alias, In, InOut, Out, Scalar, Scratch, Spec, case_label

if TYPE_CHECKING:  # the host-code reader imports this package: types only
    from ..host_entry import EntryAbi, HostFunction


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
            line = getattr(arg, "line", 0) or spec.line  # an alias's findings at the alias
            aliased = isinstance(arg, Alias)
            if isinstance(arg, Alias):
                # The alias is checked as the buffer it names (its dtype, const-ness).
                target = spec.args.get(arg.target)
                if target is None or isinstance(target, (Scalar, Alias)):
                    continue  # load_specs reported it
                used.add(arg.target)
                arg = target
            out += _param_findings(spec, kname, param, arg, line, aliased)
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


def _param_findings(
    spec: Spec,
    kname: str,
    param: Param,
    arg: In | Out | InOut | Scratch | Scalar,
    line: int,
    aliased: bool = False,
) -> list[Diagnostic]:
    """Where one argument does not fit its parameter (at `line`): pointer vs scalar, dtype vs C
    type, const. `aliased`: `arg` is the buffer an Alias names."""
    p = spec.path
    out: list[Diagnostic] = []
    if param.is_pointer and isinstance(arg, Scalar):
        out.append(
            _diag(
                p,
                line,
                f"`{param.name}` is a pointer ({param.type}) but declared Scalar",
                "spec-args",
            )
        )
        return out
    if not param.is_pointer and not isinstance(arg, Scalar):
        out.append(
            _diag(
                p,
                line,
                f"`{param.name}` is passed by value ({param.type}); declare it Scalar(...)",
                "spec-args",
            )
        )
        return out
    if getattr(arg, "dtype", None) not in DTYPES:
        return out
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
    # A const alias of an output is a later step reading what an earlier one wrote.
    if param.is_pointer and param.is_const and isinstance(arg, (Out, InOut)) and not aliased:
        out.append(
            _diag(
                p,
                line,
                f"`{param.name}` is a const pointer but declared {type(arg).__name__}",
                "spec-args",
                Severity.WARNING,
            )
        )
    return out


def check_entry_spec(spec: Spec, function: HostFunction | None, abi: EntryAbi | None) -> list[Diagnostic]:
    """Diagnostics (in the spec file) where an entry spec does not fit its host function
    (`kernel_lsp.host_entry`: `find_host_function` and its `entry_abi`): no such function, a
    signature the worker cannot call through the C ABI, parameters without args, args that are
    not parameters, pointer vs scalar, dtype vs C type. A `cudaStream_t` parameter gets the
    worker's stream and has no entry in args."""
    p = spec.path
    name = spec.entry or spec.kernel
    if function is None or abi is None:
        return [_diag(p, spec.line, f"no host function `{name}` in the .cu file", "spec-entry")]
    out = [_diag(p, spec.line, problem, "spec-entry") for problem in abi.problems]
    stream = abi.stream_param
    params = [param for param in function.params if param.name != stream]
    for param in params:
        arg = spec.args.get(param.name)
        if arg is None:
            out.append(
                _diag(
                    p,
                    spec.line,
                    f"`{name}` parameter `{param.type} {param.name}` has no entry in args",
                    "spec-args",
                )
            )
            continue
        line = getattr(arg, "line", 0) or spec.line  # an alias's findings at the alias
        aliased = isinstance(arg, Alias)
        if isinstance(arg, Alias):  # checked as the buffer it names, as a kernel's are
            target = spec.args.get(arg.target)
            if target is None or isinstance(target, (Scalar, Alias)):
                continue  # load_specs reported it
            arg = target
        out += _param_findings(spec, name, param, arg, line, aliased)
    names = {param.name for param in function.params}
    for arg_name, arg in spec.args.items():
        line = getattr(arg, "line", 0) or spec.line
        if arg_name == stream:
            out.append(
                _diag(p, line, f"`{arg_name}` is the entry's stream: the worker passes its own", "spec-args")
            )
        elif arg_name not in names:
            out.append(_diag(p, line, f"`{arg_name}` is not a parameter of {name}", "spec-args"))
    return out
