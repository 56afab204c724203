"""Statistics for latency samples: robust summaries, the stop rule, and the A/B speedup bound.

Pure numpy; used by the worker (to decide when to stop sampling) and by clients (to read results).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# A normal sample's median has standard error sqrt(pi/2) * sigma / sqrt(n).
_MEDIAN_SE = math.sqrt(math.pi / 2)
# For a normal distribution the interquartile range is 1.349 sigma; IQR is robust to the
# occasional preempted sample that would inflate a plain standard deviation.
_IQR_TO_SIGMA = 1.349


@dataclass(frozen=True)
class Measurement:
    """Latency of one launch (or one pipeline of launches) at one size."""

    median_s: float
    p10_s: float
    p90_s: float
    n: int
    cold_l2: bool
    noise: float  # relative standard error of the median (0.004 = 0.4%)
    device: str = ""
    mean_s: float = 0.0
    min_s: float = 0.0
    case: str = ""  # "n=16777216"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @property
    def spread(self) -> str:
        return f"{format_seconds(self.p10_s)}-{format_seconds(self.p90_s)}"


def median_noise(samples: Sequence[float] | np.ndarray) -> float:
    """Relative standard error of the median: the stop rule's figure (0.005 = 0.5%)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size < 2:
        return math.inf
    q25, med, q75 = np.percentile(x, [25, 50, 75])
    if med <= 0:
        return math.inf
    sigma = (q75 - q25) / _IQR_TO_SIGMA
    if sigma == 0:  # quantized timer, identical samples: fall back to the plain deviation
        sigma = float(np.std(x, ddof=1))
    return float(_MEDIAN_SE * sigma / math.sqrt(x.size) / med)


def summarize(samples: Sequence[float], cold_l2: bool, device: str = "", case: str = "") -> Measurement:
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples")
    p10, med, p90 = np.percentile(x, [10, 50, 90])
    return Measurement(
        median_s=float(med),
        p10_s=float(p10),
        p90_s=float(p90),
        n=int(x.size),
        cold_l2=cold_l2,
        noise=median_noise(x) if x.size > 1 else math.inf,
        device=device,
        mean_s=float(x.mean()),
        min_s=float(x.min()),
        case=case,
    )


def bootstrap_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    iterations: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Speedup = median(baseline) / median(candidate), with a percentile-bootstrap interval.

    Samples are taken interleaved (A B A B ...), so pair i of each comes from the same moment;
    resampling pairs keeps slow drifts (clocks, temperature) shared by both sides."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("no samples")
    ratio = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    if a.size == b.size:
        idx = rng.integers(0, a.size, (iterations, a.size))
        ra = np.median(a[idx], axis=1)
        rb = np.median(b[idx], axis=1)
    else:
        ra = np.median(a[rng.integers(0, a.size, (iterations, a.size))], axis=1)
        rb = np.median(b[rng.integers(0, b.size, (iterations, b.size))], axis=1)
    ratios = ra / rb
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return ratio, float(low), float(high)


def format_seconds(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} us"


def coefficient_of_variation(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 or x.mean() == 0:
        return 0.0
    return float(np.std(x, ddof=1) / x.mean())
