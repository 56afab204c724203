"""How the worker times launches: CUDA events around each one, cold L2 by default, warm-up by
time, and adaptive sampling until the median is known to `target_noise` or the budget is spent.

`measure` times one thing; `measure_interleaved` times several (A/B) in alternating rounds, so
clock and temperature drift hit both sides alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernel_lsp.model import TimingSettings
from kernel_lsp.stats import median_noise

if TYPE_CHECKING:
    from .device_protocol import Clock

Run = Callable[[], None]


def _warm_up(device: Clock, runs: list[Run], settings: TimingSettings, prepare: Run | None) -> float:
    """Run until `warmup_s` of wall time has passed; returns the seconds one round takes."""
    start = time.perf_counter()
    rounds, per_round = 1, 0.0
    while True:
        t0 = time.perf_counter()
        device.time_rounds(runs, rounds, settings.cold_l2, prepare)
        per_round = (time.perf_counter() - t0) / rounds
        if time.perf_counter() - start >= settings.warmup_s:
            return per_round
        rounds = min(rounds * 2, 256)


def measure_interleaved(
    device: Clock,
    runs: list[Run],
    settings: TimingSettings,
    progress: Callable[[], None] = lambda: None,
    prepare: Run | None = None,
) -> list[list[float]]:
    """Samples (seconds) for each of `runs`, gathered in interleaved rounds until every side's
    median noise is at most the target (after min_samples), max_samples, or the budget.
    `prepare` runs before every launch, outside the timed region (see runner/isolation.py)."""
    per_round = _warm_up(device, runs, settings, prepare)
    start_counting = getattr(device, "start_counting", None)
    if start_counting is not None:  # runner/judge.GpuClock: the measured samples begin here
        start_counting()
    batch = max(1, min(200, int(settings.batch_s / max(per_round, 1e-6))))
    samples: list[list[float]] = [[] for _ in runs]
    start = time.perf_counter()
    while True:
        for side, got in zip(
            samples, device.time_rounds(runs, batch, settings.cold_l2, prepare), strict=False
        ):
            side.extend(got)
        progress()
        n = len(samples[0])
        if n >= settings.min_samples and all(median_noise(s) <= settings.target_noise for s in samples):
            break
        if n >= settings.max_samples or time.perf_counter() - start >= settings.budget_s:
            break
        # Longer batches amortise the synchronisation, but stay short enough (about 0.1 s) that
        # progress frames keep the client's hang detector quiet.
        cap = max(1, int(0.1 / max(per_round, 1e-6)))
        batch = max(1, min(batch * 2, settings.max_samples - n, cap, 400))
    return samples


def measure(
    device: Clock,
    run: Run,
    settings: TimingSettings,
    progress: Callable[[], None] = lambda: None,
    prepare: Run | None = None,
) -> list[float]:
    return measure_interleaved(device, [run], settings, progress, prepare)[0]
