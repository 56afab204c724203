"""Loading a spec file in a worker process, never in the caller's.

A spec is the user's Python: it may hang, crash the interpreter, or change the process it runs in.
The server (and the CLI's GPU and optimizer paths) need only what a spec *says* (its kernels,
sizes, arguments, tolerances) to build launch steps and messages; the code in it (the reference,
`work`, callable distributions and comparisons) runs in the GPU worker, which loads the spec
itself from its text. So the caller gets a summary: the same Spec objects with each callable
replaced by a `RunsInWorker` stand-in, loaded in a spawned process under a deadline.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from dataclasses import fields, is_dataclass, replace
from typing import Any

from ..compile.pool import JOB_TIMEOUT_S, WorkerFailed, run_isolated
from .loading import SpecLoad, _diag, load_specs
from .model import Spec


class RunsInWorker:
    """Where a spec held a function: it exists (so `reference is None` still means "none"), but
    it runs only where the spec was loaded for real (the GPU worker)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"the spec's {self.name} runs in the GPU worker, not here")

    def __repr__(self) -> str:
        return f"<{self.name}: runs in the worker>"


def _summary(value: Any, name: str) -> Any:
    if callable(value) and not isinstance(value, type):
        return RunsInWorker(name)
    if isinstance(value, (list, tuple)):
        return type(value)(_summary(v, name) for v in value)
    if isinstance(value, dict):
        return {k: _summary(v, f"{name}[{k!r}]") for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _summary(getattr(value, f.name), f.name) for f in fields(value) if f.init}
        return replace(value, **changes)
    return value


def spec_summary(spec: Spec) -> Spec:
    """`spec` with every function in it (at any depth) replaced by a stand-in. `sizes_valid` is
    applied here: the summary's edge sizes are those it keeps, so its cases need no function."""
    if spec.sizes_valid is not None:
        # A sizes_valid that raises was reported by load_specs; the summary's cases are then unused.
        with contextlib.suppress(Exception):
            spec = replace(spec, edge_sizes=spec.edge_cases(), sizes_valid=None)
    return _summary(spec, "spec")


def _load_summary(path: str, source: str | None) -> SpecLoad:
    """In the worker: load for real, return what can cross to the caller."""
    loaded = load_specs(path, source)
    summary = SpecLoad(loaded.path, [spec_summary(s) for s in loaded.specs], loaded.diagnostics)
    try:
        pickle.dumps(summary)
    except Exception as e:  # a spec holding something that cannot cross (an open file, a lock)
        return SpecLoad(
            path, [], [_diag(path, 1, f"the spec holds a value that cannot be sent: {e}", "spec-type")]
        )
    return summary


def load_specs_isolated(path: str, source: str | None = None, timeout_s: float = JOB_TIMEOUT_S) -> SpecLoad:
    """`load_specs` in a spawned worker, under a deadline: a spec that hangs or crashes its
    process becomes a diagnostic in the spec, and the next load gets a fresh worker."""
    if source is None and not os.path.exists(path):
        return load_specs(path, source)  # nothing to run: the read error, as load_specs words it
    try:
        return run_isolated(_load_summary, path, source, timeout_s=timeout_s)
    except WorkerFailed as e:
        if e.reason == "timeout":
            message = f"loading the spec {e}; does it (or what it imports) never return?"
        else:
            message = f"loading the spec failed: {e}; the spec crashed it"
        return SpecLoad(path, [], [_diag(path, 1, message, e.reason)])
