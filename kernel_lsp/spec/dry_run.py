"""The dry run: a spec exercised on the CPU, with no GPU and no kernel, at its smallest case and at
the edge sizes. Inputs are drawn with every distribution, the reference runs on them, and its
outputs are matched against `args` by name, shape and dtype. What would otherwise cost a GPU run to
find (a reference that still raises NotImplementedError, an IndexError at "every size 1", an output
under another name) becomes a diagnostic at its line in the spec file.

It runs the user's code, so it goes through the same gate as loading a spec (`check.spec_findings`
runs it only where the spec may run: `specs.run`, `--specs`, CI), in a worker process under a
deadline. It stays small: a case whose buffers exceed `DRY_RUN_MAX_BYTES` is skipped, and no case
starts after `DRY_RUN_BUDGET_S`."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

from ..model import Diagnostic, Severity
from .dtypes import DTYPES
from .expressions import SpecError, eval_shape, user_line
from .inputs import VERIFY_SEED, distributions, make_inputs, run_reference
from .loading import _diag
from .model import In, InOut, Spec, case_label

DRY_RUN_MAX_BYTES = 64 << 20  # the buffers of one case
DRY_RUN_BUDGET_S = 10.0  # no case starts after this long (the worker's deadline stops a hang)

EDGE_HINT = (
    "; the edge sizes (every size 1, every size 97) must work too: constrain them with "
    "sizes_valid=..., derive related sizes with derived_sizes={...}, or give edge_sizes=[...]"
)


def dry_cases(spec: Spec) -> list[tuple[dict[str, Any], bool]]:
    """(sizes, is an edge case): the smallest case of `sizes`, then the edge cases."""
    full = [spec.complete(s) for s in spec.sizes]
    cases = [(min(full, key=_elements), False)] if full else []
    for edge in spec.edge_cases():
        if all(edge != sizes for sizes, _ in cases):
            cases.append((edge, True))
    return cases


def case_bytes(spec: Spec, sizes: Mapping[str, Any]) -> int:
    return sum(
        math.prod(eval_shape(a.shape, sizes)) * DTYPES[a.dtype].itemsize for a in spec.buffers().values()
    )


def dry_run(
    spec: Spec, max_bytes: int = DRY_RUN_MAX_BYTES, budget_s: float = DRY_RUN_BUDGET_S
) -> list[Diagnostic]:
    """The spec's first problem on the CPU, as a diagnostic in its file (none when it passes).
    Call it on a spec that loaded without errors."""
    start = time.monotonic()
    try:
        cases = dry_cases(spec)
    except Exception:  # derived sizes or sizes_valid that fail: load_specs reported them
        return []
    skipped: list[str] = []
    ran = 0
    for sizes, edge in cases:
        if time.monotonic() - start > budget_s:
            break
        try:
            nbytes = case_bytes(spec, sizes)
        except (SpecError, KeyError):  # a shape or dtype load_specs reported
            return []
        if nbytes > max_bytes:
            skipped.append(f"{case_label(sizes)} ({nbytes / 2**20:.0f} MiB)")
            continue
        ran += 1
        problem = _run_case(spec, sizes, edge)
        if problem is not None:
            return [problem]
    if skipped and not ran:
        message = (
            f"{spec.title}: not dry-run on the CPU: its smallest cases need over "
            f"{max_bytes >> 20} MiB of buffers ({'; '.join(skipped)}); add a small case to sizes"
        )
        return [_diag(spec.path, spec.line, message, "spec-dry-run", Severity.INFO)]
    return []


def _run_case(spec: Spec, sizes: dict[str, Any], edge: bool) -> Diagnostic | None:
    where = f"case {case_label(sizes)}" + (" (an edge size)" if edge else "")
    hint = EDGE_HINT if edge else ""
    runs = max([2] + [len(distributions(a)) for a in spec.args.values() if isinstance(a, (In, InOut))])
    reference_line = _reference_line(spec)
    for run in range(runs):
        try:
            inputs = make_inputs(spec, sizes, VERIFY_SEED + spec.seed, run)
        except SpecError as e:
            return _error(spec, e.line or spec.line, f"{where}: {e}{hint}")
        except Exception as e:  # a distribution callable raised
            line = user_line(e, spec.path, spec.line)
            return _error(spec, line, f"{where}: drawing the inputs raised {type(e).__name__}: {e}{hint}")
        if not callable(spec.reference):
            return None  # load_specs warned that there is none
        try:
            run_reference(spec, sizes, inputs)
        except NotImplementedError as e:
            line = user_line(e, spec.path, reference_line)
            detail = f" ({e})" if str(e) else ""
            return _error(
                spec, line, f"the reference is not written yet: it raises NotImplementedError{detail}"
            )
        except SpecError as e:  # its outputs do not match args, or it names something unknown
            return _error(spec, e.line or reference_line, f"{where}: {e}")
        except Exception as e:
            line = user_line(e, spec.path, reference_line)
            return _error(spec, line, f"{where}: the reference raised {type(e).__name__}: {e}{hint}")
    return None


def _error(spec: Spec, line: int, message: str) -> Diagnostic:
    return _diag(spec.path, line, f"dry run on the CPU: {message}", "spec-dry-run")


def _reference_line(spec: Spec) -> int:
    """Where the reference is defined, when that is in the spec file; else the Spec( line."""
    code = getattr(spec.reference, "__code__", None)
    if code is not None and spec.path and os.path.abspath(code.co_filename) == os.path.abspath(spec.path):
        return code.co_firstlineno
    return spec.line


def _elements(sizes: Mapping[str, Any]) -> int:
    return math.prod(max(1, int(v)) for v in sizes.values())
