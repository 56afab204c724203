"""Loading a spec file (the user's Python) into Spec objects; problems become diagnostics."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..files import read_text_file
from ..model import Diagnostic, Severity
from .dtypes import DTYPES
from .expressions import SpecError, eval_shape, user_line
from .inputs import check_distribution, distributions
from .model import Alias, In, InOut, Out, Scalar, Scratch, Spec, case_label

SPEC_SOURCE = "kernel-lsp spec"
# What `kernel-lsp spec` writes beside a guess it could not confirm; each is a warning until deleted.
SKELETON_TODO = "TODO(kernel-lsp)"


def spec_path_for(cu_path: str) -> str:
    """`dir/vadd.cu` -> `dir/vadd.spec.py` (the sidecar, whether it exists or not)."""
    stem, _ = os.path.splitext(cu_path)
    return stem + ".spec.py"


@dataclass
class SpecLoad:
    path: str
    specs: list[Spec] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)


def _diag(path: str, line: int, message: str, code: str, severity: Severity = Severity.ERROR) -> Diagnostic:
    return Diagnostic(path, max(1, line), 1, severity, message, code=code, source=SPEC_SOURCE)


def load_specs(path: str, source: str | None = None) -> SpecLoad:
    """Run a spec file (the user's own code) and collect its SPEC / SPECS. Never raises: an
    exception becomes a diagnostic at the line of the spec file the traceback points to.
    `source`: the file's text when the editor holds unsaved changes."""
    result = SpecLoad(path)
    try:
        if source is None:
            source = read_text_file(path)  # a FIFO or a device is a problem, never a hang
    except (OSError, UnicodeDecodeError) as e:
        result.diagnostics.append(_diag(path, 1, f"cannot read spec: {e}", "spec-read"))
        return result
    namespace: dict[str, Any] = {"__file__": path, "__name__": "kernel_lsp_spec"}
    spec_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, spec_dir)  # a spec may import helpers that sit beside it
    try:
        code = compile(source, path, "exec")
        exec(code, namespace)  # the user's own spec file
    except SyntaxError as e:
        result.diagnostics.append(_diag(path, e.lineno or 1, f"syntax error in spec: {e.msg}", "spec-syntax"))
        return result
    except BaseException as e:  # SystemExit in a spec must not stop the server
        line = user_line(e, path)
        if isinstance(e, SpecError) and e.line:
            line = e.line
        result.diagnostics.append(_diag(path, line, f"spec raised {type(e).__name__}: {e}", "spec-exception"))
        return result
    finally:
        if sys.path and sys.path[0] == spec_dir:
            sys.path.pop(0)

    found = namespace.get("SPECS", namespace.get("SPEC"))
    if found is None:
        result.diagnostics.append(
            _diag(
                path,
                1,
                "spec file defines neither SPEC = Spec(...) nor SPECS = [...]",
                "spec-missing",
            )
        )
        return result
    result.diagnostics += _skeleton_todos(path, source)
    items = found if isinstance(found, (list, tuple)) else [found]
    for item in items:
        if not isinstance(item, Spec):
            result.diagnostics.append(
                _diag(
                    path,
                    1,
                    f"SPEC(S) must hold Spec objects, found {type(item).__name__}",
                    "spec-type",
                )
            )
            continue
        item.path = path
        result.specs.append(item)
        result.diagnostics += _check_spec_alone(item)
    return result


def _check_target(spec: Spec) -> list[Diagnostic]:
    """A spec names one kernel or one entry; a baseline file must exist."""
    p, out = spec.path, []
    if spec.entry and spec.kernel and spec.kernel != spec.entry:
        out.append(_diag(p, spec.line, "give either kernel= or entry=, not both", "spec-kernel"))
    elif not spec.kernel:
        out.append(
            _diag(
                p, spec.line, 'name what to run: kernel="..." or entry="..." (a host function)', "spec-kernel"
            )
        )
    if spec.entry and spec.pipeline:
        out.append(
            _diag(
                p,
                spec.line,
                "an entry launches its own kernels: pipeline= is for kernel specs",
                "spec-kernel",
            )
        )
    baseline = spec.baseline_path()
    if spec.baseline and not spec.entry:
        out.append(
            _diag(p, spec.line, "baseline= needs entry= (it names the original's entry)", "spec-baseline")
        )
    elif baseline and not os.path.isfile(baseline):
        out.append(_diag(p, spec.line, f"baseline file not found: {baseline}", "spec-baseline"))
    return out


def _skeleton_todos(path: str, source: str) -> list[Diagnostic]:
    """A warning at each guess of the skeleton that is still marked: the spec may be wrong there."""
    out = []
    for number, text in enumerate(source.splitlines(), 1):
        if SKELETON_TODO in text:
            what = text.split(SKELETON_TODO, 1)[1].lstrip(": ").strip() or "a guess"
            message = (
                f"still as the skeleton guessed it ({what}): check it, then delete the {SKELETON_TODO} note"
            )
            out.append(_diag(path, number, message, "spec-todo", Severity.WARNING))
    return out


def _check_spec_alone(spec: Spec) -> list[Diagnostic]:
    """What can be checked without the kernel: sizes, dtypes, shapes, distributions, callables."""
    p = spec.path
    out: list[Diagnostic] = []
    if not isinstance(spec.sizes, list) or not spec.sizes or not all(isinstance(s, dict) for s in spec.sizes):
        out.append(
            _diag(
                p,
                spec.line,
                'sizes must be a non-empty list of dicts, e.g. [{"n": 1000}]',
                "spec-sizes",
            )
        )
        return out
    for s in spec.sizes:
        for k, v in s.items():
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                out.append(_diag(p, spec.line, f"size {k}={v!r} must be an int >= 0", "spec-sizes"))
    out += _check_target(spec)
    if spec.reference is None and spec.baseline:
        pass  # the baseline's entry is the oracle (differential testing)
    elif spec.reference is None:
        out.append(
            _diag(
                p,
                spec.line,
                f"{spec.title}: no reference, so results cannot be checked",
                "spec-reference",
                Severity.WARNING,
            )
        )
    elif not callable(spec.reference):
        out.append(_diag(p, spec.line, "reference must be a function", "spec-reference"))
    if not isinstance(spec.args, dict):
        out.append(_diag(p, spec.line, "args must be a dict from parameter name to In/Out/...", "spec-args"))
        return out
    if not spec.outputs():
        out.append(
            _diag(
                p,
                spec.line,
                "no Out or InOut argument: nothing to check",
                "spec-args",
                Severity.WARNING,
            )
        )
    problem = _sizes_problem(spec)
    if problem:
        out.append(_diag(p, spec.line, problem, "spec-sizes"))
        return out
    all_sizes = spec.verification_sizes() + spec.timing_cases()
    for name, arg in spec.args.items():
        if not isinstance(arg, (In, Out, InOut, Scratch, Scalar, Alias)):
            out.append(
                _diag(p, spec.line, f"`{name}` must be In, Out, InOut, Scratch, Scalar or Alias", "spec-args")
            )
            continue
        line = arg.line or spec.line
        if isinstance(arg, Alias):
            target = spec.args.get(arg.target)
            if target is None or isinstance(target, (Scalar, Alias)) or arg.target == name:
                what = "is not in args" if target is None else f"is {type(target).__name__}, not a buffer"
                if arg.target == name:
                    what = "is itself"
                out.append(
                    _diag(
                        p,
                        line,
                        f"`{name}` = Alias({arg.target!r}): `{arg.target}` {what}; an alias names a buffer "
                        "(In, Out, InOut or Scratch) declared in args",
                        "spec-args",
                    )
                )
            continue
        if arg.dtype not in DTYPES:
            out.append(
                _diag(
                    p,
                    line,
                    f"`{name}`: unknown dtype `{arg.dtype}` (use {', '.join(DTYPES)})",
                    "spec-dtype",
                )
            )
            continue
        try:
            for sizes in all_sizes:
                if isinstance(arg, Scalar):
                    spec.scalar_value(name, sizes)
                else:
                    eval_shape(arg.shape, sizes)
        except SpecError as e:
            what = "value" if isinstance(arg, Scalar) else "shape"
            out.append(_diag(p, line, f"`{name}` {what}: {e} (case {case_label(sizes)})", "spec-shape"))
        if isinstance(arg, (In, InOut)):
            for dist in distributions(arg):
                problem = check_distribution(dist)
                if problem:
                    out.append(_diag(p, line, f"`{name}`: {problem}", "spec-dist"))
    return out


def _sizes_problem(spec: Spec) -> str | None:
    """What is wrong with `derived_sizes` and `sizes_valid`, evaluated on every case; None if fine."""
    derived = spec.derived_sizes or {}
    if not isinstance(derived, dict):
        return 'derived_sizes must be a dict of size name -> expression, e.g. {"nnz": "rows * 16"}'
    given = [n for n in derived if n in spec.size_names]
    if given:
        return f"{', '.join(given)}: derived (derived_sizes) and also given in sizes; give it in one place"
    if spec.sizes_valid is not None and not callable(spec.sizes_valid):
        return "sizes_valid must be a function of sizes by name, e.g. lambda rows, nnz: nnz >= rows"
    for sizes in [*spec.sizes, *(spec.timing_sizes or [])]:
        try:
            full = spec.complete(sizes)
        except SpecError as e:
            return f"derived_sizes: {e} (case {case_label(sizes)})"
        try:
            ok = spec.valid(full)
        except Exception as e:  # the user's function
            return f"sizes_valid raised {type(e).__name__}: {e} (case {case_label(full)})"
        if not ok:
            return f"case {case_label(full)} of sizes fails sizes_valid"
    try:
        spec.edge_cases()
    except SpecError as e:
        return f"derived_sizes: {e} (edge sizes)"
    except Exception as e:
        return f"sizes_valid raised {type(e).__name__}: {e} (edge sizes)"
    return None
