"""The A/A noise floor: how much one configuration moves between repeats, and the smallest change
a comparison of two sides of as many runs would likely resolve, by the same t and power as the
repeat estimate (stats.more_runs), so the two never disagree."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from tuning.compare.stats import CONFIDENCE, POWER, finite_sorted
from tuning.compare.tdist import t_quantile


@dataclass(frozen=True)
class NoiseFloor:
    """How much one configuration moves between repeats (the A/A noise)."""

    n: int
    mean: float | None
    cv: float | None  # std (ddof=1) / mean across runs
    min_detectable: float | None  # ~ smallest relative change two sides of n runs can resolve
    t: float | None = None  # Student's t the floor used (2(n - 1) degrees of freedom)


def noise_floor(
    values: Sequence[float], confidence: float = CONFIDENCE, power: float = POWER
) -> NoiseFloor:
    """From repeats of one configuration: (t + z_power) * cv * sqrt(2 / n), the smallest relative
    change a comparison of two sides of n runs each would likely (at `power`) call at
    `confidence`: the same t (Welch's at equal spreads: 2(n - 1) degrees of freedom) and power
    as `more_runs`, so the floor and "more runs would decide it" agree. With 2 runs a side t is
    4.30 at 95 %, not z = 1.96: why a 1 % win needs many repeats."""
    arr = finite_sorted(values)
    if arr.size < 2 or arr.mean() == 0:
        return NoiseFloor(arr.size, float(arr.mean()) if arr.size else None, None, None)
    cv = float(arr.std(ddof=1) / abs(arr.mean()))
    t = t_quantile(confidence, 2.0 * (arr.size - 1))
    k = t + NormalDist().inv_cdf(power)
    return NoiseFloor(arr.size, float(arr.mean()), cv, k * cv * math.sqrt(2.0 / arr.size), t)
