"""A spec read without running it: what its text alone shows.

Used where the spec may not run (a file the user has not opened or saved in the editor, the
server's start-up walk, `specs.run = "never"`, `--specs static` in CI): a syntax error, a file
that assigns neither SPEC nor SPECS, and a `Spec(kernel="...")` (or `pipeline=[...]`) written as
literals that names no kernel of the `.cu`. The same codes and wording as a spec that ran."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..model import Diagnostic
from ..source import KernelSignature, find_kernel
from .loading import _diag


def read_spec_statically(path: str, text: str, kernels: Sequence[KernelSignature]) -> list[Diagnostic]:
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return [_diag(path, e.lineno or 1, f"syntax error in spec: {e.msg}", "spec-syntax")]
    except (ValueError, RecursionError, MemoryError) as e:  # a NUL byte, nesting without end
        return [_diag(path, 1, f"spec cannot be read: {type(e).__name__}", "spec-syntax")]
    if not _binds_spec(tree):
        return [
            _diag(path, 1, "spec file defines neither SPEC = Spec(...) nor SPECS = [...]", "spec-missing")
        ]
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and _called_name(call.func) == "Spec"):
            continue
        for name in _literal_kernels(call):
            if find_kernel(list(kernels), name) is None:
                found.append(_diag(path, call.lineno, f"no kernel `{name}` in the .cu file", "spec-kernel"))
    return found


def _binds_spec(tree: ast.Module) -> bool:
    """Whether the module binds SPEC or SPECS at its top level (assignment, import, any form)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in ("SPEC", "SPECS"):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) in ("SPEC", "SPECS", "*") for a in node.names
        ):
            return True
    return False


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal_kernels(call: ast.Call) -> list[str]:
    """The kernels a Spec(...) call names as string literals: its `pipeline=[...]`, else its
    `kernel=` (as `Spec.kernels` reads them)."""
    values = {kw.arg: kw.value for kw in call.keywords}
    named = values.get("pipeline")
    if isinstance(named, (ast.List, ast.Tuple)) and named.elts:
        items = named.elts
    elif named is None or (isinstance(named, ast.Constant) and named.value is None):
        items = [values["kernel"]] if "kernel" in values else []
    else:
        return []  # a pipeline computed at run time
    names = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names if len(names) == len(items) else []
