"""The offline tuner: no LLM, the default when none is configured.

It searches the compile-time parameters the user marked (`// kernel-lsp: tune BLOCK=64,128 VEC=1,2`)
and, for a kernel without tunables, what its launches hold: the launch line's literal block, or
the constants its launches take their block from (a macro, a `constexpr`, `int threads = 256;` or
`dim3 block(256)` in the launcher), cap or set their grid with (`#define MAX_BLOCKS 1024`), pass as
template arguments (`k<ITEMS><<<...>>>`), and the tile constants the launched kernels read; see
kernel_lsp/host_launch/tunables.py. With none, `nothing_to_tune` says why, launch by launch.
Each configuration becomes a `.cu` text with the chosen `#define` defaults (see tunables.py), so
the loop's three gates and the final diff treat it like any other candidate.

Configurations that cannot launch are never compiled: a block over the arch's thread limit, static
`__shared__` arrays (as far as the file's constants size them) plus dynamic shared memory over the
block's limit, or a launch expression that does not evaluate, is ruled out from the text alone. Registers ×
threads over the SM's register file, or shared memory over the limit, are caught right after the
compile (evaluator.launch_problem), before any GPU time is spent.
"""

from __future__ import annotations

from kernel_lsp import archs
from kernel_lsp.host_launch.tunables import launch_constants, nothing_to_tune, static_shared_bytes
from kernel_lsp.source import parse_directives
from kernel_lsp.spec import Spec

from ..evaluator import spec_launch_shapes
from ..model import Outcome, Proposal
from ..strategies import DEFAULT_STRATEGY, Config, SearchSpace, Strategy, make_strategy
from ..tunables import LAUNCH_BLOCK, apply_config, current_config, launch_block_space
from .base import Proposer, RoundContext

STATIC_SHARED_LIMIT = 48 * 1024  # bytes of static `__shared__` a kernel may declare on every arch


def tune_space(source: str, kernels: list[str], defines: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """The tune comment's parameters; else the launch comment's literal block size; else the
    constants the kernels' launches hold: their block size (`#define BLOCK_SIZE 256`, `constexpr
    int threadsPerBlock = 256;`, `dim3 block(256)` in the launcher), grid caps, template arguments
    and the tiles the kernels read."""
    space = dict(parse_directives(source).tune_space)
    if not space:
        blocks = launch_block_space(source, kernels)
        if blocks:
            space[LAUNCH_BLOCK] = blocks
        else:
            for c in launch_constants(source, kernels, defines):
                space[c.key] = tuple(str(v) for v in c.choices)
    return space


def config_label(config: Config) -> str:
    """`block=256`, `BLOCK_SIZE=128`, `threads=512` (a constant's line left out)."""
    return " ".join(f"{k.replace(LAUNCH_BLOCK, 'block').split('@')[0]}={v}" for k, v in config.items())


class TunerProposer(Proposer):
    name = "tune"
    stop_when_stalled = False  # the strategy knows when it is done
    reads_profile = False  # it searches the tunables; the profile is for the report only
    proposes_trusted = True

    def __init__(
        self,
        original: str,
        spec: Spec,
        kernels: list[str],
        arch: str,
        defines: tuple[str, ...] = (),
        strategy: str = DEFAULT_STRATEGY,
        seed: int = 0,
    ) -> None:
        self.original = original
        self.spec = spec
        self.kernels = kernels
        self.arch = arch
        self.defines = defines
        self.strategy_name = strategy
        self.params = tune_space(original, kernels, defines)
        self.space = SearchSpace(self.params, self._launchable)
        self.start = current_config(original, self.params, defines) if self.params else None
        self.strategy: Strategy | None = (
            make_strategy(strategy, self.space, seed=seed, start=self.start) if self.params else None
        )
        self._pending: list[Config] = []
        # Why there is nothing to search, in words (the session's error says it).
        self.reason = "" if self.params else nothing_to_tune(original, kernels, defines)

    def _launchable(self, config: Config) -> bool:
        """From the launch line alone: every launch evaluates, within the thread limit."""
        lim = archs.limits_for(self.arch)
        source = apply_config(self.original, config)
        # Command-line -D values would override the file's defaults: drop the tuned names.
        defines = tuple(d for d in self.defines if d.partition("=")[0] not in config)
        static = static_shared_bytes(source, self.kernels, defines) if lim else {}
        if lim and any(b > min(STATIC_SHARED_LIMIT, lim.max_shared_per_block) for b in static.values()):
            return False  # static __shared__ arrays: 48 KiB at most, whatever the opt-in limit
        for sizes in self.spec.timing_cases() + self.spec.verification_sizes():
            shapes = spec_launch_shapes(source, self.spec, self.kernels, sizes, defines)
            for kernel, (_grid, block, smem) in shapes.items():
                if lim and (
                    block[0] * block[1] * block[2] > lim.max_threads_per_block
                    or smem + static.get(kernel.split("<")[0], 0) > lim.max_shared_per_block
                ):
                    return False
        return True

    @property
    def searchable(self) -> bool:
        return self.strategy is not None

    def settings(self) -> dict[str, object]:
        return {
            "proposer": self.name,
            "strategy": self.strategy_name,
            "space": {k: list(v) for k, v in self.space.values.items()},
            "space_size": self.space.raw_size,
        }

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        if self.strategy is None:
            return []
        self._pending = self.strategy.ask(ctx.count)
        # The user's own code with other constants: its host code is the user's (not fenced).
        return [
            Proposal(
                self.name, apply_config(self.original, c), note=config_label(c), config=dict(c), trusted=True
            )
            for c in self._pending
        ]

    def seed(self, baseline: Outcome) -> None:
        # The configuration as written is the baseline: already measured, never proposed.
        if self.strategy is not None and self.start is not None:
            self.strategy.asked.add(self.space.key(self.start))
            self.strategy.tell(self.start, baseline.latency_s)

    def observe(self, outcomes: list[Outcome]) -> None:
        if self.strategy is None:
            return
        for config, outcome in zip(self._pending, outcomes, strict=False):
            self.strategy.tell(config, outcome.latency_s if outcome.figures else None)
        self._pending = []
