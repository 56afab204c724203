"""Verification that resists cheating kernels (DESIGN.md's list), run inside the worker.

For every case (the spec's sizes plus edge sizes) and every run (one per input distribution, at
least two, each with a fresh seed, in the SAME buffers so a result cached by pointer goes stale):
- inputs are fresh random arrays; outputs and scratch are poisoned with a different byte pattern
  each run (NaN-like 0xFF, then 0x7F), so a stale or unwritten output never passes;
- every buffer has guard bytes before and after it, which must be intact after the launch;
- inputs must be bit-identical after the launch (In buffers);
- outputs are compared with the numpy reference (tolerance or the spec's compare function);
- every SM's shared memory holds the run's poison before the launch, so a kernel that reads
  shared memory its block never wrote reads the poison, not zeros left there by chance (in the
  context the kernels run in: a judged candidate's own process, runner/judge.py);
- the same inputs run again (poison 0xA5) and must agree with the first run (races);
- optionally the original kernel runs on the same inputs and the candidate must agree with it.
Before every launch the modules' mutable globals go back to their loaded image, so no run sees
what an earlier one left there. Timing cases use other inputs, several sets in turn, and their
outputs are checked too (runner/isolation.py: no fast path while timed); a judged candidate's
first run on each set as well as its last.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_lsp.gpu_results import Problem  # re-exported: the runner's modules name it here
from kernel_lsp.runner import case_memo, turns
from kernel_lsp.spec import (
    DTYPES,
    FLOAT_DTYPES,
    InOut,
    Scratch,
    Spec,
    SpecError,
    case_label,
    default_tolerance,
    eval_shape,
    host_view,
    launch_dims,
)
from kernel_lsp.spec.inputs import VERIFY_SEED

if TYPE_CHECKING:
    from .device_protocol import Device

FRONT_GUARD = 256  # bytes before each buffer (keeps the buffer 256-byte aligned)
TAIL_GUARD = 64 * 1024  # bytes after: covers a grid rounded up by a block of float4s
POISONS = (0xFF, 0x7F)  # per run: NaN in every float type, then a huge value
RERUN_POISON = 0xA5

Progress = Callable[[str, str, float | None], None]  # (phase, case, timeout_s or None=long)


@dataclass
class Step:
    """One launch of a pipeline: the function handle and how to call it."""

    kernel: str
    fn: Any
    params: list[str]
    grid: str
    block: str
    smem: str
    constants: dict[str, int] = field(default_factory=dict)  # macros the launch line may use


class Failed(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class Buffers:
    """The device buffers of one case, each with guard bytes on both sides.

    On a device that shares buffers (`share_buffers`: the judge, runner/judge.py) each buffer is
    an allocation another process can map, its tail guard running to the allocation's end, and
    `settle()` copies them into memory of the judge's own after a run: reads then see what was
    there when the run was declared done, not what the other process writes afterwards."""

    device: Device
    spec: Spec
    sizes: dict[str, int]
    ptrs: dict[str, int] = field(default_factory=dict)
    nbytes: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    timed: bool = False  # a timing set: a run settles its outputs only
    on_free: list[Callable[[], None]] = field(default_factory=list)
    _bases: list[int] = field(default_factory=list)
    _sizes: dict[int, int] = field(default_factory=dict)  # base -> bytes allocated
    _tails: dict[str, np.ndarray] = field(default_factory=dict)
    _guard: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    _mirror: dict[int, int] = field(default_factory=dict)  # base -> the judge's own copy
    _settled: bool = False

    def __post_init__(self) -> None:
        rng = np.random.default_rng(0x6A4D)
        self._guard = rng.integers(0, 256, FRONT_GUARD + TAIL_GUARD, dtype=np.uint8)
        shared = bool(getattr(self.device, "share_buffers", False))
        for name, arg in self.spec.buffers().items():
            shape = eval_shape(arg.shape, self.sizes)
            nbytes = math.prod(shape) * DTYPES[arg.dtype].itemsize
            want = FRONT_GUARD + nbytes + TAIL_GUARD
            size = self.device.shared_size(want) if shared else want
            base = self.device.alloc_shared(want) if shared else self.device.alloc(want)
            self._bases.append(base)
            self._sizes[base] = size
            self.ptrs[name], self.nbytes[name], self.shapes[name] = base + FRONT_GUARD, nbytes, shape
            tail = self._guard[FRONT_GUARD:]
            if size > want:  # the rest of a shared allocation is guard too: the other process maps it all
                tail = np.concatenate([tail, rng.integers(0, 256, size - want, dtype=np.uint8)])
            self._tails[name] = tail
            self.device.upload(base, self._guard[:FRONT_GUARD])
            self.device.upload(base + FRONT_GUARD + nbytes, tail)
            if shared:  # made and touched now: a first settle must cost what every later one does
                self._mirror[base] = self.device.alloc(size)
                self.device.fill(self._mirror[base], 0, size)

    @property
    def bases(self) -> list[int]:
        return list(self._bases)

    def base_of(self, ptr: int) -> int:
        for base in self._bases:
            if base <= ptr < base + self._sizes[base]:
                return base
        raise ValueError("not a pointer into this case's buffers")

    def settle(self, outputs_only: bool = False, wait: bool = True) -> None:
        """Copy the buffers (or the outputs' only) into the judge's own memory and wait (without
        `wait`, the copies are queued: a gated run's, before its last mark): later reads see
        them as they are now."""
        names = self.spec.outputs() if outputs_only else self.spec.buffers()
        bases = [self.base_of(self.ptrs[n]) for n in names] if outputs_only else self._bases
        for base in bases:
            if base not in self._mirror:
                self._mirror[base] = self.device.alloc(self._sizes[base])
            self.device.copy_async(self._mirror[base], base, self._sizes[base])
        if wait:
            self.device.sync()
        self._settled = True

    def keep_outputs(self) -> dict[str, int]:
        """The outputs as they are now (the judge's copy where a run settled them), copied into
        new allocations of the judge's own, queued with no wait (between two timed runs, the
        judge's rhythm stays as it is): name -> pointer, which the caller frees."""
        kept: dict[str, int] = {}
        for name in self.spec.outputs():
            kept[name] = self.device.alloc(self.nbytes[name])
            self.device.copy_async(kept[name], self._settled_at(self.ptrs[name]), self.nbytes[name])
        return kept

    def read_kept(self, name: str, ptr: int) -> np.ndarray:
        """Output `name` as `keep_outputs` kept it at `ptr`."""
        return self._shaped(name, self.device.download(ptr, self.nbytes[name]))

    def _settled_at(self, ptr: int) -> int:
        """Where `ptr`'s bytes are to be read: in the judge's copy once a run settled them."""
        if self._settled:
            base = self.base_of(ptr)
            if base in self._mirror:
                return self._mirror[base] + (ptr - base)
        return ptr

    def _download(self, ptr: int, nbytes: int) -> np.ndarray:
        return self.device.download(self._settled_at(ptr), nbytes)

    def free(self) -> None:
        for callback in self.on_free:
            callback()
        self.on_free.clear()
        for base in self._bases:
            self.device.free(base)
        for copy in self._mirror.values():
            self.device.free(copy)
        self._bases.clear()
        self._mirror.clear()

    def broken_guards(self) -> list[str]:
        broken = []
        for name, ptr in self.ptrs.items():
            guard = self._tails[name]
            front = self._download(ptr - FRONT_GUARD, FRONT_GUARD)
            tail = self._download(ptr + self.nbytes[name], guard.size)
            if not np.array_equal(front, self._guard[:FRONT_GUARD]):
                off = int(np.flatnonzero(front != self._guard[:FRONT_GUARD])[0]) - FRONT_GUARD
                broken.append(f"`{name}`: wrote {-off} bytes before its start")
            if not np.array_equal(tail, guard):
                diff = np.flatnonzero(tail != guard)
                item = DTYPES[self.spec.buffer(name).dtype].itemsize
                broken.append(
                    f"`{name}`: wrote past its end (element {self.nbytes[name] // item + diff[0] // item}"
                    f" of {self.nbytes[name] // item}, {diff.size} guard bytes changed)"
                )
        return broken

    def upload(self, name: str, array: np.ndarray) -> None:
        self._settled = False
        self.device.upload(self.ptrs[name], array)

    def read(self, name: str) -> np.ndarray:
        return self._shaped(name, self._download(self.ptrs[name], self.nbytes[name]))

    def _shaped(self, name: str, raw: np.ndarray) -> np.ndarray:
        return raw.view(DTYPES[self.spec.buffer(name).dtype]).reshape(self.shapes[name])

    def poison(self, byte: int) -> None:
        self._settled = False
        for name, arg in self.spec.buffers().items():
            if isinstance(arg, Scratch):
                self.device.fill(self.ptrs[name], 0 if arg.zero else byte, self.nbytes[name])
            elif arg.kind == "out":
                self.device.fill(self.ptrs[name], byte, self.nbytes[name])

    def args_for(self, step: Step) -> list[np.ndarray]:
        args = []
        for p in step.params:
            arg = self.spec.args[p]
            if arg.kind == "scalar":
                args.append(np.array([self.spec.scalar_value(p, self.sizes)]))
            else:  # an Alias gets the pointer of the buffer it names
                args.append(np.array([self.ptrs[self.spec.buffer_name(p)]], dtype=np.uint64))
        return args


def baseline_oracle(
    device: Device, spec: Spec, sizes: dict[str, int], baseline: list[Any], reset: Callable[[], None]
) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Outputs of the baseline on given inputs, in buffers of their own (differential testing)."""

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        bufs = Buffers(device, spec, sizes)
        try:
            return CaseRunner(device, spec, lambda case: device.sync(), reset).execute(
                baseline, bufs, inputs, POISONS[0], case_label(sizes)
            )
        finally:
            bufs.free()

    return oracle


def launcher(
    device: Device, steps: list[Any], bufs: Buffers, smem_poison: int | None = None
) -> Callable[[], None]:
    """A callable that enqueues the whole pipeline once (argument arrays built once). A host
    entry's step (runner/entry.py) is called instead of launched, and the context synchronised
    after it: whatever it queued, on any stream, is done when the call counts as done.
    `smem_poison` (verification): the byte every SM's shared memory holds before the launch,
    written where the kernels run: in this process's context for its own steps, and in the
    accused's for a judged one (runner/judge.RemotePipeline: the judge asks, the accused's
    copy of the judge's own poison kernel writes it)."""
    plan: list[Callable[[], None]] = []
    entries = False
    local = False
    for step in steps:
        if getattr(step, "remote", False):
            plan.append(step.bind(device, bufs, smem_poison))
            continue
        local = True
        if hasattr(step, "bind"):
            plan.append(step.bind(device, bufs))
            entries = True
            continue
        try:
            names = {**step.constants, **bufs.sizes}
            grid, block, smem = launch_dims(step.grid, step.block, step.smem, names)
        except SpecError as e:
            raise Failed(Problem("spec_error", case_label(bufs.sizes), str(e))) from None
        plan.append(functools.partial(device.launch, step.fn, grid, block, smem, bufs.args_for(step)))

    def run() -> None:
        if smem_poison is not None and local:
            device.poison_shared_memory(smem_poison)
        for call in plan:
            call()
        if entries:
            device.sync_all()

    return run


# --- comparing ----------------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def compare_output(
    name: str,
    got: np.ndarray,
    expected: np.ndarray,
    atol: float,
    rtol: float,
    compare: Callable[[np.ndarray, np.ndarray], str | None] | None = None,
    what: str = "expected",
) -> str | None:
    """None when `got` matches, else a message naming the first bad index, the max abs and rel
    error and the number of wrong elements. A constant output where the expected values vary is
    wrong even inside the tolerance."""
    stored = np.asarray(got).dtype
    got, expected = host_view(np.asarray(got)), host_view(np.asarray(expected))
    if compare is not None:
        msg = compare(got.copy(), expected.copy())
        return f"`{name}`: {msg}" if msg else None
    if got.shape != expected.shape:
        return f"`{name}`: shape {got.shape}, {what} {expected.shape}"
    constant = constant_output(got, expected, stored, what)
    if constant:
        return f"`{name}`: {constant}"
    if all_close(got.reshape(-1), expected.reshape(-1), atol, rtol):
        return None
    g = got.astype(np.float64).reshape(-1)
    e = expected.astype(np.float64).reshape(-1)
    bad = _wrong(g, e, atol, rtol)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
    count = int(bad.sum())
    if count == 0:
        return None
    first = int(np.flatnonzero(bad)[0])
    index = tuple(int(i) for i in np.unravel_index(first, got.shape)) if got.ndim > 1 else first
    finite = np.where(bad & np.isfinite(diff), diff, 0.0)
    max_abs = float(np.max(finite)) if np.any(bad & np.isfinite(diff)) else math.inf
    if np.any(bad & ~np.isfinite(diff)):
        max_abs = math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        # relative to |expected|, or to the tolerance floor where expected is 0
        rel = np.where(bad, diff / np.maximum(np.abs(e), max(atol, 1e-12)), 0.0)
    max_rel = float(np.nanmax(rel)) if not np.all(np.isnan(rel)) else math.inf
    if np.any(bad & np.isnan(rel)):
        max_rel = math.inf
    unwritten = int(np.isnan(g[bad]).sum())
    note = f"; {unwritten} still hold the poison (never written?)" if unwritten else ""
    return (
        f"`{name}`: {count} of {g.size} elements wrong, first at index {index}: got "
        f"{_fmt(g[first])}, {what} {_fmt(e[first])}; max abs error {_fmt(max_abs)}, "
        f"max rel error {_fmt(max_rel)}{note}"
    )


# A comparison of a large output goes chunk by chunk, chunks side by side in threads (numpy lets
# go of the GIL): one pass over 16M elements took ~50 ms as whole-array float64 temporaries,
# and a judged optimize round compares a hundred of them (benchmarks/judge_cost.py's profile).
_CHUNK = 1 << 18
_COMPARE_THREADS = min(8, os.cpu_count() or 1)


@functools.cache
def _comparer() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_COMPARE_THREADS, thread_name_prefix="kernel-lsp-compare")


def _wrong(g: np.ndarray, e: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Which elements of `g` (float64) are outside the tolerance around `e` (float64): NaN counts
    as wrong, except where NaN is expected."""
    with np.errstate(invalid="ignore", over="ignore"):
        wrong = ~(np.abs(g - e) <= atol + rtol * np.abs(e))
    return wrong & ~(np.isnan(g) & np.isnan(e))


def _close_chunk(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    return not _wrong(got.astype(np.float64), expected.astype(np.float64), atol, rtol).any()


def all_close(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    """Whether every element of `got` is within `atol + rtol * |expected|` of `expected` (in
    float64; NaN only where NaN is expected): `compare_output`'s verdict without its message."""
    n = got.size
    if n <= 2 * _CHUNK or _COMPARE_THREADS < 2:
        return all(
            _close_chunk(got[lo : lo + 4 * _CHUNK], expected[lo : lo + 4 * _CHUNK], atol, rtol)
            for lo in range(0, max(n, 1), 4 * _CHUNK)
        )
    chunks = range(0, n, _CHUNK)
    return all(
        _comparer().map(
            lambda lo: _close_chunk(got[lo : lo + _CHUNK], expected[lo : lo + _CHUNK], atol, rtol), chunks
        )
    )


def constant_output(
    got: np.ndarray, expected: np.ndarray, stored: np.dtype, what: str = "expected"
) -> str | None:
    """ "the output is constant: every element is 0 (all zeros), ..." when `got` holds one value and `expected`, rounded to
    the output's dtype, does not: a kernel that writes a constant can hide inside a loose
    tolerance (a bf16 softmax over 4096 columns has every value below bf16's default atol)."""
    g = got.reshape(-1)
    if g.size < 2 or not np.all(g[:64] == g[0]) or not np.all(g == g[0]):  # most differ early
        return None
    try:
        e = np.asarray(expected).astype(stored).astype(np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        e = np.asarray(expected, dtype=np.float64).reshape(-1)
    e = e[np.isfinite(e)]
    if e.size < 2 or np.all(e == e[0]):
        return None
    value = _fmt(float(g[0]))
    zeros = " (all zeros)" if float(g[0]) == 0.0 else ""
    return (
        f"the output is constant: every element is {value}{zeros}, where the {what} values vary "
        f"({e.min():.4g} to {e.max():.4g}); wrong even where each value is within the tolerance"
    )


def tolerance(arg: Any) -> tuple[float, float]:
    atol, rtol = default_tolerance(arg.dtype)
    return (atol if arg.atol is None else arg.atol, rtol if arg.rtol is None else arg.rtol)


def _poison_count(spec: Spec, name: str, got: np.ndarray, poison: int) -> int:
    """Elements still holding the poison bytes (a kernel that never wrote them)."""
    item = DTYPES[spec.buffer(name).dtype].itemsize
    raw = np.ascontiguousarray(got).view(np.uint8).reshape(-1, item)
    return int(np.all(raw == poison, axis=1).sum())


# --- running a case ------------------------------------------------------------------------------

# The progress phase of a wait for a GPU turn (runner/turns.py): a host phase, without a launch
# timeout; the launch phase after it starts once the turn is held.
WAITING_FOR_THE_GPU = "waiting for the GPU"


class CaseRunner:
    def __init__(
        self,
        device: Device,
        spec: Spec,
        sync_with_timeout: Callable[[str], None],
        reset: Callable[[], None] = lambda: None,
    ):
        self.device = device
        self.spec = spec
        # Synchronises the stream; the caller announces a launch phase (with its timeout) first.
        self.sync = sync_with_timeout
        # Puts the modules' globals back to their loaded image (runner/isolation.py).
        self.reset = reset
        # Cases whose first run's (inputs, reference) are kept for the timed launches.
        self.keep: set[str] = set()
        self.kept: dict[str, list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]] = {}

    def execute(
        self,
        steps: list[Step],
        bufs: Buffers,
        inputs: dict[str, np.ndarray],
        poison: int,
        case: str,
        launching: Callable[[], None] = lambda: None,
    ) -> dict[str, np.ndarray]:
        """Upload inputs, poison outputs, run the pipeline once, check guards and inputs, and
        return the outputs. `launching` is called once the GPU turn is held: the caller's launch
        phase (with its timeout) starts there, not while the turn is waited for."""
        # The GPU's part in a shared turn (other processes' verification may run beside it, never
        # a timed launch: runner/turns.py); the comparisons after it, on the host, in none.
        with turns.shared():
            launching()
            for name, array in inputs.items():
                bufs.upload(name, array)
            bufs.poison(poison)
            self.reset()
            launcher(self.device, steps, bufs, smem_poison=poison)()
            self.sync(case)
            broken = bufs.broken_guards()
            if broken:
                raise Failed(
                    Problem("guard", case, f"case {case}: out-of-bounds write: " + "; ".join(broken))
                )
            read_back = {  # each read is a new array (the fake GPU's too), compared below
                name: bufs.read(name) for name in inputs if not isinstance(self.spec.args[name], InOut)
            }
            outputs = {name: bufs.read(name).copy() for name in self.spec.outputs()}
        for name, array in inputs.items():
            if isinstance(self.spec.args[name], InOut):
                continue
            after = read_back[name]
            if not np.array_equal(after.view(np.uint8), np.ascontiguousarray(array).view(np.uint8)):
                flat_a = np.ascontiguousarray(after).view(np.uint8).reshape(-1)
                flat_b = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
                item = array.dtype.itemsize
                changed = np.flatnonzero(flat_a != flat_b) // item
                raise Failed(
                    Problem(
                        "input_modified",
                        case,
                        f"case {case}: input `{name}` was modified by the kernel ({np.unique(changed).size} "
                        f"elements changed, first at index {int(changed[0])}); declare it InOut "
                        "if that is intended",
                        name,
                    )
                )
        return outputs

    def check_against(
        self,
        outputs: dict[str, np.ndarray],
        expected: dict[str, np.ndarray],
        case: str,
        kind: str,
        what: str,
        poison: int | None = None,
    ) -> None:
        for name, arg in self.spec.outputs().items():
            atol, rtol = tolerance(arg)
            msg = compare_output(
                name, outputs[name], expected[name], atol, rtol, getattr(arg, "compare", None), what
            )
            if msg:
                if poison is not None and arg.dtype not in FLOAT_DTYPES:
                    left = _poison_count(self.spec, name, outputs[name], poison)
                    if left:
                        msg += f"; {left} still hold the poison (never written?)"
                if kind == "race":
                    msg = f"two runs on the same inputs disagree (a race?): {msg}"
                raise Failed(Problem(kind, case, f"case {case}: {msg}", name))

    def verify_case(
        self,
        steps: list[Step],
        sizes: dict[str, int],
        progress: Progress,
        launch_timeout: float,
        baseline: list[Step] | None = None,
        runs: int = 2,
    ) -> None:
        case = case_label(sizes)
        bufs = Buffers(self.device, self.spec, sizes)
        differential = self.spec.reference is None and bool(baseline)
        prepared = _prepare_runs(self.spec, sizes, runs, differential, sum(bufs.nbytes.values()))

        def phase(name: str) -> Callable[[], None]:
            """A launch phase whose timeout starts once its GPU turn is held: a turn another
            process holds for a while (a timed launch) is a wait, not a hang."""
            progress(WAITING_FOR_THE_GPU, case, None)
            return lambda: progress(name, case, launch_timeout)

        try:
            for run in range(runs):
                progress("inputs and reference", case, None)
                poison = POISONS[run % len(POISONS)]
                try:
                    inputs, reference = prepared[run]()
                except Exception as e:  # the user's reference or distribution raised
                    raise Failed(
                        Problem("spec_error", case, f"case {case}: {type(e).__name__}: {e}")
                    ) from None
                if differential:  # no reference: the baseline's outputs are the oracle
                    assert baseline is not None
                    reference = self.execute(baseline, bufs, inputs, poison, case, phase("original entry"))
                if run == 0 and case in self.keep:  # same distribution as the timing inputs
                    self.kept.setdefault(case, []).append((inputs, reference))
                first = self.execute(steps, bufs, inputs, poison, case, phase("verify"))
                what = "the original gave" if differential else "expected"
                self.check_against(
                    first, reference, case, "baseline_mismatch" if differential else "mismatch", what, poison
                )
                second = self.execute(steps, bufs, inputs, RERUN_POISON, case, phase("race check"))
                self.check_against(second, first, case, "race", "first run gave", RERUN_POISON)
                if baseline and not differential:
                    original = self.execute(baseline, bufs, inputs, poison, case, phase("original kernel"))
                    self.check_against(first, original, case, "baseline_mismatch", "original kernel gave")
        finally:
            for get in prepared:
                get.cancel()
            bufs.free()


# A case's runs whose buffers together are at least this large get their inputs and references
# made side by side, in threads (numpy releases the GIL in what they spend their time on: 2 runs
# of a 2^25-element case used 1.5-1.9 CPU-seconds per wall second on 2 cores), while the runs
# are still checked in order.
SIDE_BY_SIDE_BYTES = 16 * 2**20
SIDE_BY_SIDE_MAX_BYTES = 4 * 2**30  # never more than this made at once for one case's runs


class _Prepared:
    """One run's (inputs, reference): made when taken, or in a thread already started."""

    def __init__(self, make: Callable[[], Any], future: Any = None):
        self._make, self._future = make, future

    def __call__(self) -> Any:  # what its maker returns
        return self._future.result() if self._future is not None else self._make()

    def cancel(self) -> None:
        if self._future is not None:
            self._future.cancel()


def _prepare_runs(
    spec: Spec, sizes: dict[str, int], runs: int, differential: bool, case_bytes: int
) -> list[_Prepared]:
    """Each run's inputs (and reference, unless the baseline is the oracle): for a large case,
    runs 1.. started at once in threads while run 0 is made and checked here; the same arrays
    as one after another (each run's own seed), so the verdicts do not change. A run that
    raised raises when it is taken, in order."""

    def make(run: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        seed = VERIFY_SEED + spec.seed
        inputs = case_memo.inputs(spec, sizes, seed, run)
        return inputs, ({} if differential else case_memo.reference(spec, sizes, seed, run, inputs))

    return side_by_side([functools.partial(make, run) for run in range(runs)], case_bytes)


def gpu_lanes() -> int:
    """Worker processes on this worker's GPU (KERNEL_LSP_GPU_LANES, set by its client: `check`'s
    lanes), which share its memory and the host's CPUs."""
    try:
        return max(1, int(os.environ.get("KERNEL_LSP_GPU_LANES", "1")))
    except ValueError:
        return 1


def host_threads() -> int:
    """Threads for host work made side by side: this process's CPUs, shared with the other
    workers on its GPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus // gpu_lanes())


def side_by_side(makers: list[Callable[[], Any]], each_bytes: int, all_kept: bool = False) -> list[_Prepared]:
    """`makers` (each making about `each_bytes` of arrays) as _Prepared: the first made when
    taken, in the caller's thread, the others started now in threads (as many at once as the
    host has CPUs for) when they are large enough together to gain from it and, unless the
    caller keeps them all anyway (`all_kept`), not so large that holding them all is a risk."""
    total = each_bytes * len(makers)
    if len(makers) < 2 or total < SIDE_BY_SIDE_BYTES or (not all_kept and total > SIDE_BY_SIDE_MAX_BYTES):
        return [_Prepared(m) for m in makers]
    workers = min(len(makers) - 1, host_threads())
    executor = ThreadPoolExecutor(workers, thread_name_prefix="kernel-lsp-inputs")
    later = [_Prepared(m, executor.submit(m)) for m in makers[1:]]
    executor.shutdown(wait=False)  # its threads end when their arrays are made
    return [_Prepared(makers[0]), *later]
