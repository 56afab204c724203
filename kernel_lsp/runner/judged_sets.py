"""The input sets of a judged timing case (runner/judge.py): what keeps the accused from working
on inputs outside its timed requests, and one side of an A/B from touching the other's.

- The inputs of every set live in the judge's own device memory (the stash), which no accused
  maps. Each side (the original, the candidate) has buffers of its own, mapped only into its
  own process: `batch` sets of them, one per run of a request.
- Before each request, on the judge's clock (runner/judge.HostClock), the judge copies the
  inputs of the batch's group of sets from the stash into the side's buffers, poisons their
  outputs with a byte the kernel cannot predict, and puts InOut buffers back to their initial
  values. No timing input reaches an accused before the request that times it: work it does on
  them as they arrive is on the clock, and the stand-in request that follows (the same copies)
  takes only the judge's own part off.
- The sets are split into groups: a side's batches run on group 0 while warming up and then,
  at its 2nd and 4th measured batch, on a group new to it, so batches on new inputs can be set
  against the batches on inputs seen before (runner/judge.seen_inputs_faster).
- After timing, every set of each side's last batch is checked against the reference of its
  inputs: the outputs the timed runs left, as the judge copied them after the answer.
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_lsp.runner import case_memo, turns
from kernel_lsp.runner.isolation import FRESH_GROUPS, check_set_outputs
from kernel_lsp.runner.verify import Buffers, side_by_side
from kernel_lsp.spec import DTYPES, InOut, Scratch, Spec, eval_shape

GROUPS = 1 + FRESH_GROUPS  # the warm-up's group, and one for each turn on new inputs


def _bytes(spec: Spec, sizes: dict[str, int], names: list[str]) -> int:
    args = spec.buffers()
    return sum(math.prod(eval_shape(args[n].shape, sizes)) * DTYPES[args[n].dtype].itemsize for n in names)


def judged_batch_most(
    spec: Spec, sizes: dict[str, int], sides: int, device_bytes: int, host_bytes: int
) -> int:
    """The largest batch the memory shares allow (at least one): per run of a batch, each side's
    buffers and the judge's copy of them, and a stash set of inputs for each group, on the
    device; each stash set's inputs (and its reference, once checked) on the host."""
    inputs = _bytes(spec, sizes, [n for n, a in spec.buffers().items() if a.is_input])
    case = _bytes(spec, sizes, list(spec.buffers()))
    device = sides * 2 * case + GROUPS * inputs
    host = GROUPS * (inputs + case)
    most = []
    for share, per_run in ((device_bytes, device), (host_bytes, host)):
        if share > 0 and per_run > 0:
            most.append(int(0.25 * share) // per_run)
    return max(1, min(most, default=1))


class JudgedSets:
    """The stash and the sides' buffers of one judged timing case."""

    def __init__(
        self, device: Any, spec: Spec, sizes: dict[str, int], seed: int, sides: int, batch: int, most: int
    ):
        self.device, self.spec, self.sizes, self.seed = device, spec, sizes, seed
        self.batch = 0
        self.most = max(1, most)
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.inputs: list[dict[str, np.ndarray]] = []  # per stash set, on the host
        self.stash: list[dict[str, int]] = []  # per stash set: input name -> the judge's device copy
        self.buffers: list[list[Buffers]] = [[] for _ in range(sides)]  # per side, one per run
        # Each side's runs bound in a process: (side, pipeline, bound runs), the side's own
        # accused and the judge's stand-in process (runner/judge.HostClock).
        self._binders: list[tuple[int, Any, list[Any]]] = []
        self.warming = True  # warm up on group 0; the measured batches then move on (`_advance`)
        self._calls = [0] * sides
        self._group = [0] * sides
        self._seen: list[set[int]] = [{0} for _ in range(sides)]
        self._new = [False] * sides
        self.on_bind: Callable[[], None] = lambda: None  # sets made, their binding begins (a phase)
        self.oracle: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
        self._in = [n for n, a in spec.buffers().items() if a.is_input]
        self.cold_l2 = True  # each timed run in the accused after an L2 flush, as in-process
        try:
            self._grow_to(min(max(1, batch), self.most))
        except BaseException:
            self.free()
            raise

    # --- making ---------------------------------------------------------------------------------

    def _seed_of(self, k: int) -> int:
        return self.seed + 7919 * k

    def _grow_to(self, batch: int) -> None:
        """Stash sets for every group of `batch` runs, and `batch` buffers a side, made now (a
        large case's inputs side by side in threads: runner/verify.side_by_side)."""
        first = len(self.inputs)
        wanted = range(first, GROUPS * batch)
        made = side_by_side(
            [functools.partial(case_memo.inputs, self.spec, self.sizes, self._seed_of(k), 0) for k in wanted],
            _bytes(self.spec, self.sizes, self._in),
            all_kept=True,  # every set is kept until the timing ends anyway
        )
        arrays = [m() for m in made]
        with turns.shared():
            for inputs in arrays:
                stash: dict[str, int] = {}
                for name in self._in:
                    data = np.ascontiguousarray(inputs[name])
                    stash[name] = self.device.alloc(data.nbytes)
                    self.device.upload(stash[name], data)
                self.inputs.append(inputs)
                self.stash.append(stash)
            for side in self.buffers:
                while len(side) < batch:
                    side.append(Buffers(self.device, self.spec, self.sizes, timed=True))
        self.batch = batch

    def grow(self, batch: int) -> int:
        """Judged batches of `batch` runs from now on, as far as memory allows (`most`): the new
        sets are made and each side's new buffers bound in its process. Called while warming up
        (runner/judge.HostClock.resize_batch), when only group 0 has been run. Returns the batch
        size now."""
        batch = min(self.most, max(1, batch))
        if batch > self.batch:
            old = [len(b) for b in self.buffers]
            self._grow_to(batch)
            self.on_bind()
            for side, pipeline, bound in self._binders:
                bound.extend(pipeline.bind(self.device, b) for b in self.buffers[side][old[side] :])
        return self.batch

    # --- a side's runs --------------------------------------------------------------------------

    def _bind(self, side: int, pipeline: Any) -> list[Any]:
        bound = [pipeline.bind(self.device, b) for b in self.buffers[side]]
        self._binders.append((side, pipeline, bound))
        return bound

    def runner(self, side: int, pipeline: Any) -> Callable[[], None]:
        """The side's timed request: its candidate (runner/judge.RemotePipeline) on every set of
        the batch, in one request, its buffers as `prepare_side` left them."""
        bound = self._bind(side, pipeline)
        return lambda: pipeline.run_batch(bound[: self.batch], flush=self.cold_l2)

    def stand_in(self, side: int, stand_in: Any, waits: bool) -> Callable[[], None]:
        """The judge's stand-in for the side's request (runner/judge.HostClock), in `stand_in`,
        a process that runs only the judge's code (a RemotePipeline with no candidate): the
        same batch on the side's buffers, each run filling its outputs (`waits`: and waiting
        for them, as a host entry's call ends)."""
        bound = self._bind(side, stand_in)
        return lambda: stand_in.run_batch(
            bound[: self.batch], stand_in=True, wait_each=waits, flush=self.cold_l2
        )

    def _advance(self, side: int) -> None:
        """The group of the side's next measured batch: a group new to it at its 2nd and 4th
        (the sets made for the turns on new inputs), else the one it is on."""
        calls = self._calls[side] = self._calls[side] + 1
        if calls >= 2 and calls & (calls - 1) == 0 and self._group[side] + 1 < GROUPS:
            self._group[side] += 1
        self._new[side] = self._group[side] not in self._seen[side]
        self._seen[side].add(self._group[side])

    def prepare_side(self, side: int, again: bool = False) -> None:
        """Before a request of side `side`, on the judge's clock (runner/judge.HostClock): the
        inputs of its batch's group copied from the stash into its buffers, outputs and scratch
        poisoned with a byte the kernel cannot predict, InOut buffers back to their initial
        values (copied from the stash too). Queued on the judge's stream; the clock waits for
        it. `again`: the same group once more (the stand-in's request)."""
        if not again and not self.warming:
            self._advance(side)
        group = self._group[side] if not self.warming else 0
        byte = self.rng.randrange(256)
        for k, bufs in enumerate(self.buffers[side][: self.batch]):
            stash = self.stash[group * self.batch + k]
            for name in self._in:
                self.device.copy_async(bufs.ptrs[name], stash[name], bufs.nbytes[name])
            for name, arg in self.spec.buffers().items():
                if (arg.kind == "out" or isinstance(arg, Scratch)) and not isinstance(arg, InOut):
                    self.device.fill_async(bufs.ptrs[name], byte, bufs.nbytes[name])

    def stop_warming(self) -> None:
        self.warming = False

    def new_to(self, side: int) -> bool:
        """Whether the inputs of side `side`'s last measured batch were new to it."""
        return self._new[side]

    def stand_in_runner(self, side: int, waits: bool) -> Callable[[], None]:
        """What the stand-in's run is in this process, on one set's buffers, to be timed with the
        judge's own CUDA events (its in-process figure): the outputs filled, and (`waits`) the
        wait a host entry's call ends with."""
        bufs = self.buffers[side][0]
        outputs = [(bufs.ptrs[n], bufs.nbytes[n]) for n in self.spec.outputs()]

        def run() -> None:
            for ptr, nbytes in outputs:
                self.device.fill_async(ptr, 0, nbytes)
            if waits:
                self.device.sync_all()

        return run

    # --- checking -------------------------------------------------------------------------------

    def _reference(self, k: int) -> dict[str, np.ndarray]:
        if self.oracle is not None:
            return self.oracle(self.inputs[k])
        return case_memo.reference(self.spec, self.sizes, self._seed_of(k), 0, self.inputs[k])

    def check_outputs(
        self,
        side: int,
        label: str,
        progress: Callable[[str, str, float | None], None],
        most: int | None = None,
    ) -> None:
        """Every set of the side's last measured batch (or `most` of them, chosen at random):
        the outputs its timed runs left (the judge's copy after the answer) against the
        reference of that set's inputs."""
        group = self._group[side] if self._calls[side] else 0
        runs = list(range(self.batch))
        if most is not None and most < len(runs):
            runs = sorted(self.rng.sample(runs, most))
        sets = [group * self.batch + k for k in runs]
        progress("checking timed outputs", label, None)
        makers: list[Callable[[], dict[str, np.ndarray]]] = [
            functools.partial(self._reference, k) for k in sets
        ]
        references = side_by_side(
            makers, 0 if self.oracle is not None else _bytes(self.spec, self.sizes, self._in)
        )
        try:
            for k, stash_set, reference in zip(runs, sets, references, strict=True):
                progress("checking timed outputs", label, None)
                where = f"{label}, input set {stash_set + 1} of {len(self.inputs)}"
                check_set_outputs(self.device, self.spec, self.buffers[side][k], reference(), label, where)
        finally:
            for reference in references:
                reference.cancel()

    def free(self) -> None:
        for side in self.buffers:
            for bufs in side:
                bufs.free()
            side.clear()
        for stash in self.stash:
            for ptr in stash.values():
                self.device.free(ptr)
        self.stash.clear()
