"""What keeps one launch from making a later one cheaper (issue 12), inside the worker.

- `ModuleState`: the CUBIN's mutable globals (`__device__`/`__managed__` variables, found in its
  ELF symbol table) copied on the device right after loading; `restore()` puts that image back,
  ordered on the timing stream, before every verification run and every timed launch. A result
  memoised in a global (keyed by pointers or by input values), or a launch counter, is gone by
  the next launch.
- `TimedSets`: several distinct input sets for the timed launches (more than a plausible cache
  would hold), used in turn, so no timed launch repeats the inputs of the one before it. Before
  each timed launch (outside the timed region) the set's outputs get a random poison byte the
  kernel cannot predict, InOut buffers are copied back from their pristine image, and the
  globals are restored. After timing, the outputs each checked set was left with must match the
  reference for that set's inputs.
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kernel_lsp.elf import STT_OBJECT, Elf, ElfError
from kernel_lsp.runner import case_memo, turns
from kernel_lsp.runner.verify import Buffers, CaseRunner, Failed, Problem, Step, launcher, side_by_side
from kernel_lsp.spec import DTYPES, InOut, Scratch, Spec, eval_shape

if TYPE_CHECKING:
    from .device_protocol import Device

GLOBAL_SECTIONS = (".nv.global",)  # .nv.global (zero-initialised) and .nv.global.init

MAX_SETS = 3  # distinct input sets for timed launches (one of them a verification run's)
# A candidate judged from another process (runner/judge.py) runs one set a timed run, between
# the judge's gates (`GatedRun`), on sets it has not seen in verification; each set's inputs
# live in the judge's own memory and are written into the buffers the accused maps only inside
# the gate, right before its `go`. Now and then a side runs on a set new to it (at its 2nd, 4th,
# 8th... measured run): those runs are the yardstick for the figure its runs give, and the
# outputs of each side's first run on each set are checked, so a run on new inputs cannot skip
# its work.
JUDGED_SETS = 9
SETS_MEMORY_FRACTION = 0.25  # of the device's memory, for all sets of one case together
CHECKED_SETS = 2  # sets whose final outputs are checked after timing (chosen at random)


def cubin_globals(cubin: bytes) -> list[str]:
    """Names of the mutable global variables of a CUBIN (object symbols in `.nv.global*`
    sections; `__constant__` data lives in `.nv.constant*` and cannot be written by a kernel).
    Not an ELF64 image, or a broken one: no names (parsing never raises)."""
    try:
        elf = Elf(cubin)
        found: list[str] = []
        for sym in elf.symbols():
            if sym.type != STT_OBJECT or not 0 < sym.shndx < len(elf.sections):
                continue
            if (
                elf.sections[sym.shndx].name.startswith(GLOBAL_SECTIONS)
                and sym.name
                and sym.name not in found
            ):
                found.append(sym.name)
        return found
    except (ElfError, ValueError):
        return []


@dataclass
class ModuleState:
    """The loaded image of one module's mutable globals, kept on the device."""

    device: Device
    regions: list[tuple[str, int, int, int]] = field(default_factory=list)  # name, ptr, copy, bytes
    unresolved: list[str] = field(default_factory=list)

    @classmethod
    def snapshot(cls, device: Device, module: Any, cubin: bytes) -> ModuleState:
        return cls.of(device, device.module_globals(module, cubin))

    @classmethod
    def of(cls, device: Device, variables: Sequence[tuple[str, int | None, int]]) -> ModuleState:
        """The loaded image of these globals: (name, device address or None, bytes) each."""
        state = cls(device)
        for name, ptr, nbytes in variables:
            if ptr is None:
                state.unresolved.append(name)
                continue
            copy = device.alloc(nbytes)
            device.copy_async(copy, ptr, nbytes)
            state.regions.append((name, ptr, copy, nbytes))
        device.sync()
        return state

    @property
    def names(self) -> list[str]:
        return [r[0] for r in self.regions]

    def restore(self) -> None:
        """Enqueue the copies that put every global back to its loaded image."""
        for _name, ptr, copy, nbytes in self.regions:
            self.device.copy_async(ptr, copy, nbytes)

    def free(self) -> None:
        for _name, _ptr, copy, _nbytes in self.regions:
            self.device.free(copy)
        self.regions.clear()


def restorer(states: Sequence[ModuleState]) -> Callable[[], None]:
    def restore() -> None:
        for s in states:
            s.restore()

    return restore


@dataclass
class InputSet:
    bufs: Buffers
    inputs: dict[str, np.ndarray]
    pristine: dict[str, int]  # InOut name -> device copy of its initial contents
    launched: bool = False
    reference: dict[str, np.ndarray] | None = None  # known already (a verification run's)


def _case_bytes(spec: Spec, sizes: dict[str, int]) -> int:
    return sum(
        math.prod(eval_shape(a.shape, sizes)) * DTYPES[a.dtype].itemsize for a in spec.buffers().values()
    )


def set_count(
    spec: Spec, sizes: dict[str, int], device_bytes: int, most: int = MAX_SETS, host_bytes: int = 0
) -> int:
    """How many input sets of this case fit the memory shares (at least one, at most `most`):
    the device's, and the host's where given (each set's inputs, and its reference once
    checked, are kept on the host until the timing ends)."""
    case_bytes = _case_bytes(spec, sizes)
    if case_bytes <= 0:
        return most
    count = most
    for share in (device_bytes, host_bytes):
        if share > 0:
            count = min(count, int(SETS_MEMORY_FRACTION * share) // case_bytes)
    return max(1, count)


class TimedSets:
    """The input sets of one timing case and the preparation of each timed launch."""

    def __init__(
        self,
        device: Device,
        spec: Spec,
        sizes: dict[str, int],
        seed: int,
        restore_globals: Callable[[], None],
        count: int,
        verified: Sequence[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = (),
        gated: bool = False,
    ):
        """`count` sets: the first from `seed`, then the (inputs, reference) pairs of
        `verified` (this case's verification inputs, already made and checked: free), then more
        fresh ones from other seeds. `gated` (a judged candidate's sets): every input kept in the
        judge's own memory and written into the set's buffers before each run (`prepare_set`)."""
        self.device = device
        self.spec = spec
        self.restore_globals = restore_globals
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.sets: list[InputSet] = []
        self.current = -1
        self.zero = any(isinstance(a, Scratch) and a.zero for a in spec.args.values())
        # The outputs a set's inputs must give, where verification did not already say: the
        # spec's reference, or (differential testing) the baseline run on those inputs.
        self.oracle: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
        # Judged from another process (the worker sets `warming`): warm up on set 0 alone, then
        # note per side (A/B) which sets each run had seen before, for judge.seen_inputs_faster.
        self.warming = False
        self.gated = gated  # a judged candidate's sets: one a gated run (`GatedRun`)
        self._seen: dict[int, set[int]] = {}  # per side: the sets it has run on
        self._calls: dict[int, int] = {}  # per side: gated runs measured
        self._used = 1  # sets some side has run on
        self._new = False  # whether the last gated run's set was new to its side (warm-up too)
        # The outputs of each side's first run on each set (side, set, output -> a copy on the
        # device), checked with the rest (`check_outputs`).
        self.first_outputs: list[tuple[int, int, dict[str, int]]] = []
        self.seed = seed
        # Judge-private copies of every input of a gated set, written into its buffers inside
        # the gate: set k -> name -> pointer.
        self._private: dict[int, dict[str, int]] = {}
        try:
            self._add_sets(sizes, max(1, count), list(verified)[: max(0, count - 1)])
        except BaseException:
            self.free()
            raise

    def _add_sets(
        self,
        sizes: dict[str, int],
        count: int,
        given: Sequence[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = (),
    ) -> None:
        """Sets up to `count` in all: set k is `given[k - 1]` where there is one, else fresh
        from its own seed (distinct values, same distribution; a large case's fresh sets are
        made side by side in threads, as many at once as the host has CPUs for:
        runner/verify.side_by_side. A judged batch of 16 sets of a 2^25-element bf16 add made
        one after another took 40 s of a 90 s round on an H200's host)."""
        spec, device = self.spec, self.device
        wanted = range(len(self.sets), count)
        fresh = [k for k in wanted if not 1 <= k <= len(given)]
        made = dict(
            zip(
                fresh,
                side_by_side(
                    [functools.partial(case_memo.inputs, spec, sizes, self._seed_of(k), 0) for k in fresh],
                    _case_bytes(spec, sizes),
                    all_kept=True,  # every set is kept until the timing ends anyway
                ),
                strict=True,
            )
        )
        # Every set's inputs made first, on the host; then their uploads in one shared turn on
        # the GPU (runner/turns.py).
        chosen: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]] = [
            given[k - 1] if 1 <= k <= len(given) else (made[k](), None) for k in wanted
        ]
        with turns.shared():
            for inputs, reference in chosen:
                bufs = Buffers(device, spec, sizes, timed=True)
                self.sets.append(InputSet(bufs, inputs, {}))
                if reference is not None:
                    self.sets[-1].reference = reference
                if self.gated:  # the buffers the accused maps hold no inputs before a gate
                    private = self._private[len(self.sets) - 1] = {}
                    for name, array in inputs.items():
                        private[name] = device.alloc(bufs.nbytes[name])
                        device.upload(private[name], array)
                        device.fill(bufs.ptrs[name], 0, bufs.nbytes[name])
                    continue
                for name, array in inputs.items():
                    bufs.upload(name, array)
                    if isinstance(spec.args[name], InOut):
                        copy = device.alloc(bufs.nbytes[name])
                        self.sets[-1].pristine[name] = copy
                        device.upload(copy, array)

    def _seed_of(self, k: int) -> int:
        """Set k's seed, where it was made here (not a verification run's)."""
        return self.seed + 7919 * k

    def _reference(self, k: int) -> dict[str, np.ndarray]:
        """The outputs set k's inputs must give."""
        s = self.sets[k]
        if s.reference is not None:
            return s.reference
        if self.oracle is not None:
            return self.oracle(s.inputs)
        return case_memo.reference(self.spec, self.sizes, self._seed_of(k), 0, s.inputs)

    @property
    def sizes(self) -> dict[str, int]:
        return self.sets[0].bufs.sizes

    def prepare(self) -> None:
        """Before a timed launch, outside its events: the next set (a gated one: the set its
        side's last run chose), poisoned outputs, InOut buffers back to their initial values,
        globals back to the loaded image."""
        if not self.gated:
            self.current = 0 if self.warming else (self.current + 1) % len(self.sets)
        self.prepare_set(max(0, self.current))

    def choose(self, side: int) -> int:
        """The set of side `side`'s next gated run: set 0 while warming up; at a side's 2nd, 4th,
        8th... measured run, a set new to it (the one the other side last moved to, or the next
        unused one), so runs on new inputs are spread over the measurement; otherwise the set
        in use."""
        seen = self._seen.setdefault(side, set())
        if self.warming:
            self.current = 0
            self._new = 0 not in seen
            seen.add(0)
            return 0
        calls = self._calls[side] = self._calls.get(side, 0) + 1
        seen.add(0)
        k = max(0, self.current)
        if calls >= 2 and calls & (calls - 1) == 0 and k in seen and self._used < len(self.sets):
            k = self._used
            self._used += 1
        self._new = k not in seen
        seen.add(k)
        self.current = k
        return k

    def keep_first_outputs(self, side: int, k: int) -> None:
        """After a gated run of set k (its outputs in the judge's copy): where it was the side's
        first run on that set, its outputs kept for `check_outputs`. The last run's outputs of
        a set alone would let a candidate skip the work on inputs it sees for the first time and
        do it on the next runs, which then look no slower than the runs on new inputs."""
        if self._new:
            self.first_outputs.append((side, k, self.sets[k].bufs.keep_outputs()))

    def scrub_set(self, k: int) -> None:
        """After a gated run of set k, its inputs emptied from the buffers the accused maps
        (queued behind the judge's copy of the outputs, outside the bracket): they hold the
        set's inputs only from the judge's preparation to the end of the run, so work the
        accused's process does before the judge's start mark (its stream need not wait for
        `go`) has nothing to compute from, even on a set it ran before. What it does after
        the inputs are written and before the start mark is counted to it
        (judge.GpuClock)."""
        s = self.sets[k]
        for name in self._private.get(k, {}):
            self.device.fill_async(s.bufs.ptrs[name], 0, s.bufs.nbytes[name])

    def prepare_set(self, k: int) -> None:
        """Set k ready for a run (queued): a gated set's inputs written from the judge's copies,
        its outputs and unzeroed scratch poisoned with a byte it cannot predict, InOut back to
        its initial values, the scratch the spec zeroes zeroed, the globals restored."""
        self.current = k
        s = self.sets[k]
        s.launched = True
        byte = self.rng.randrange(256)
        private = self._private.get(k, {})
        for name, arg in self.spec.buffers().items():
            ptr, nbytes = s.bufs.ptrs[name], s.bufs.nbytes[name]
            if name in private:
                self.device.copy_async(ptr, private[name], nbytes)
            elif arg.kind == "out" or (isinstance(arg, Scratch) and not arg.zero):
                self.device.fill_async(ptr, byte, nbytes)
            elif name in s.pristine:
                self.device.copy_async(ptr, s.pristine[name], nbytes)
            elif self.gated and isinstance(arg, Scratch) and arg.zero:
                self.device.fill_async(ptr, 0, nbytes)
        self.restore_globals()

    def stop_warming(self) -> None:
        self.warming = False

    def new_to(self, side: int) -> bool:
        """Whether the inputs of side `side`'s last gated run were new to it."""
        return self._new

    def runner(self, steps: list[Step]) -> Callable[[], None]:
        """The timed part for `steps`: zeroing the scratch the spec asks for, then the launch, on
        the set `prepare` chose; a judged candidate's, a GatedRun."""
        if len(steps) == 1 and hasattr(steps[0], "run_gated"):
            return GatedRun(self, steps[0])
        launches = [launcher(self.device, steps, s.bufs) for s in self.sets]

        def run() -> None:
            s = self.sets[self.current]
            if self.zero:
                for name, arg in self.spec.buffers().items():
                    if isinstance(arg, Scratch) and arg.zero:
                        self.device.fill_async(s.bufs.ptrs[name], 0, s.bufs.nbytes[name])
            launches[self.current]()

        return run

    def check_outputs(
        self, label: str, progress: Callable[[str, str, float | None], None], include: int | None = None
    ) -> None:
        """The outputs left by the last timed launch on each set whose reference is known, on
        set `include`, on every set of the last judged batch (a batch could skip the work of one
        set in it), and on sets chosen at random until CHECKED_SETS are checked, must match the
        reference of that set's inputs (no fast path while timed); so must the outputs of each
        side's first gated run on each set (`keep_first_outputs`)."""
        with turns.shared():
            self.device.sync()
        launched = [k for k, s in enumerate(self.sets) if s.launched]
        last = {self.current} if self.gated else set()
        chosen = {k for k in launched if k in last or self.sets[k].reference is not None or k == include}
        rest = [k for k in launched if k not in chosen]
        chosen.update(self.rng.sample(rest, max(0, min(CHECKED_SETS - len(chosen), len(rest)))))
        firsts: dict[int, list[dict[str, int]]] = {}
        for _side, k, kept in self.first_outputs:
            firsts.setdefault(k, []).append(kept)
        order = sorted(chosen | set(firsts))
        progress("checking timed outputs", label, None)
        references = self._references(order)
        try:
            for k, reference in zip(order, references, strict=True):
                expected = reference()
                for kept in firsts.get(k, []):
                    with turns.shared():
                        outs = {n: self.sets[k].bufs.read_kept(n, ptr) for n, ptr in kept.items()}
                    self._check_set(k, expected, label, progress, outs, "its first timed launch on it")
                if k in chosen:
                    self._check_set(k, expected, label, progress)
        finally:
            for reference in references:
                reference.cancel()

    def _references(self, sets: list[int]) -> list[Any]:
        """The references of `sets`, in order, as runner/verify._Prepared: a large case's made
        side by side in threads (the spec's reference on the host: layernorm at 4096 x 4096,
        about 0.3 s a set, for every set of a batch of 16). A baseline as the oracle runs on
        this process's GPU, one set after another."""
        makers: list[Callable[[], dict[str, np.ndarray]]] = [
            functools.partial(self._reference, k) for k in sets
        ]
        if self.oracle is not None:
            return side_by_side(makers, 0)
        return side_by_side(makers, _case_bytes(self.spec, self.sizes))

    def _check_set(
        self,
        k: int,
        reference: dict[str, np.ndarray],
        label: str,
        progress: Callable[[str, str, float | None], None],
        outs: dict[str, np.ndarray] | None = None,
        launch: str = "its last timed launch on it",
    ) -> None:
        """Set k's outputs, as its last timed launch left them (or `outs`, as `launch` left
        them), against its reference."""
        s = self.sets[k]
        progress("checking timed outputs", label, None)
        if outs is None:
            with turns.shared():
                outs = {n: s.bufs.read(n) for n in self.spec.outputs()}
        where = f"{label}, input set {k + 1} of {len(self.sets)}, {launch}"
        try:
            CaseRunner(self.device, self.spec, lambda c: None).check_against(
                outs, reference, where, "timing_mismatch", "expected (timing inputs)"
            )
        except Failed as f:
            raise Failed(
                Problem(
                    "timing_mismatch",
                    label,
                    f"the outputs of the timed launches are wrong: {f.problem.message}",
                    f.problem.output,
                )
            ) from None

    def free(self) -> None:
        for _side, _k, kept in self.first_outputs:
            for ptr in kept.values():
                self.device.free(ptr)
        self.first_outputs.clear()
        for private in self._private.values():
            for ptr in private.values():
                self.device.free(ptr)
        self._private.clear()
        for s in self.sets:
            s.bufs.free()
            for ptr in s.pristine.values():
                self.device.free(ptr)
            s.pristine.clear()


class GatedTimes(NamedTuple):
    """One gated run's times, in seconds of the judge's events."""

    bracket: float  # from the start mark (then `go`) to `done` seen
    copy: float  # the judge's copy of the outputs after it
    # From the mark before the run's inputs were written to the start mark: the judge's own
    # preparation (inputs, poison, L2 flush), and any GPU time the accused's context took there.
    preparation: float


class GatedRun:
    """A judged candidate's timed part (runner/judge.RemotePipeline): called, one run on the set
    `prepare` left ready (queued before it, so an accused cannot see the set before the call);
    `timed`, one gated run on the set its side's turn chooses, prepared inside the gate."""

    def __init__(self, sets: TimedSets, pipeline: Any):
        self.sets, self.pipeline = sets, pipeline
        self.bound = [pipeline.bind(sets.device, s.bufs) for s in sets.sets]

    def __call__(self) -> None:
        self.sets.device.sync()  # the set's preparation, queued in the judge's context, is done
        self.pipeline.run_batch([self.bound[max(0, self.sets.current)]])

    def timed(self, side: int, cold_l2: bool) -> GatedTimes:
        """One gated run's times (judge.Gate.run), its set's inputs emptied after it."""
        k = self.sets.choose(side)
        try:
            times = self.pipeline.run_gated(
                self.sets.device, self.bound[k], lambda: self.sets.prepare_set(k), cold_l2
            )
        finally:
            self.sets.scrub_set(k)
        self.sets.keep_first_outputs(side, k)
        return times

    def preparation(self, cold_l2: bool) -> float:
        """The judge's preparation of a run alone, no run queued (judge.RemotePipeline)."""
        k = max(0, self.sets.current)
        try:
            return self.pipeline.preparation(self.sets.device, lambda: self.sets.prepare_set(k), cold_l2)
        finally:
            self.sets.scrub_set(k)
