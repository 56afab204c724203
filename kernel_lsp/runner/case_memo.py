"""Inputs and references a judging worker keeps between the requests of one optimize run.

A judge worker (`runner/worker.py --judge`) lives for one optimize run, whose spec text is fixed
for the run, and it verifies and times the baseline, every candidate and the A/B comparison on
the same cases with the same seeds. Making those inputs and running the spec's numpy reference
again for each was a third of the worker's time in a round (benchmarks/judge_cost.py's profile
on an H200: 3.4-4.3 s of references and 1.1-1.5 s of inputs a round). The memo keeps them, by
(the request's spec, sizes, seed, run), within a byte budget: an earlier spec's arrays go first
(least recently used first), the request's own stay as they came (`_put`).

What it keeps is the judge's own: a candidate never sees these arrays (its process gets device
buffers the judge filled), so keeping them gives a candidate nothing it did not have. The arrays
are made read-only: a caller that would change one in place fails loudly instead of changing the
next request's inputs. A worker that is not a judge (the long-lived one behind `check` and the
editor, where a spec's helper module can change between requests) keeps nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernel_lsp.spec import Spec, make_inputs, run_reference

Arrays = dict[str, np.ndarray]


def _budget_bytes() -> int:
    """A quarter of the machine's memory, at most 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 0
    return min(4 << 30, total // 4) if total > 0 else 1 << 30


class CaseMemo:
    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = _budget_bytes() if max_bytes is None else max_bytes
        self._items: OrderedDict[tuple[Any, ...], tuple[Arrays, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # sets and runs are made side by side in threads
        self._spec_keys: dict[int, str] = {}  # id(spec) -> the request's spec, as text
        self.hits = 0
        self.misses = 0

    def begin_request(self, spec: Spec, desc: Mapping[str, Any]) -> None:
        """The spec a request loaded, named by what the request said about it (path, source,
        kernel): the same text in a later request is the same spec."""
        desc = dict(desc)
        if desc.get("source") is None and desc.get("path"):  # read from its file: its state too
            try:
                st = os.stat(str(desc["path"]))
                desc["file"] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                self._spec_keys = {}
                return
        text = json.dumps(desc, sort_keys=True, default=str)
        self._spec_keys = {id(spec): hashlib.sha256(text.encode()).hexdigest()}

    def _get(self, key: tuple[Any, ...]) -> Arrays | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def _put(self, key: tuple[Any, ...], arrays: Arrays) -> Arrays:
        nbytes = sum(a.nbytes for a in arrays.values())
        if nbytes > self.max_bytes // 4:
            return arrays  # too large to be worth a quarter of the budget: made each time
        for a in arrays.values():
            a.flags.writeable = False
        with self._lock:
            if key in self._items:
                return self._items[key][0]
            # Room is made from other specs' arrays (an earlier request's), least recently
            # used first. The request's own are not dropped for more of its own: a judged
            # batch asks for its sets in the same order on every timing, and a scan longer
            # than the memo would drop each set just before it is asked for again (no hit at
            # all); kept as they came, the first sets that fit are hits on every pass.
            for old in [k for k in self._items if k[1] != key[1]]:
                if self._bytes + nbytes <= self.max_bytes:
                    break
                self._bytes -= self._items.pop(old)[1]
            if self._bytes + nbytes > self.max_bytes:
                return arrays
            self._items[key] = (arrays, nbytes)
            self._bytes += nbytes
            return arrays

    def _memo(
        self, kind: str, spec: Spec, sizes: Mapping[str, Any], seed: int, run: int, make: Callable[[], Arrays]
    ) -> Arrays:
        spec_key = self._spec_keys.get(id(spec))
        if spec_key is None:  # not the request's spec (a baseline's, say): nothing kept
            return make()
        key = (kind, spec_key, tuple(sorted(sizes.items())), seed, run)
        found = self._get(key)
        return found if found is not None else self._put(key, make())

    def inputs(self, spec: Spec, sizes: Mapping[str, Any], seed: int, run: int) -> Arrays:
        return self._memo("inputs", spec, sizes, seed, run, lambda: make_inputs(spec, sizes, seed, run))

    def reference(self, spec: Spec, sizes: Mapping[str, Any], seed: int, run: int, inputs: Arrays) -> Arrays:
        """The reference's outputs for the inputs `inputs(spec, sizes, seed, run)` gave."""
        return self._memo("reference", spec, sizes, seed, run, lambda: run_reference(spec, sizes, inputs))


# The worker's memo, where it is a judge (set once at its start); None elsewhere.
ACTIVE: CaseMemo | None = None


def inputs(spec: Spec, sizes: Mapping[str, Any], seed: int, run: int = 0) -> Arrays:
    """`make_inputs`, through the judge's memo where there is one."""
    return (
        ACTIVE.inputs(spec, sizes, seed, run) if ACTIVE is not None else make_inputs(spec, sizes, seed, run)
    )


def reference(spec: Spec, sizes: Mapping[str, Any], seed: int, run: int, inputs: Arrays) -> Arrays:
    """`run_reference` on `inputs(spec, sizes, seed, run)`, through the judge's memo where there is one."""
    if ACTIVE is not None:
        return ACTIVE.reference(spec, sizes, seed, run, inputs)
    return run_reference(spec, sizes, inputs)
