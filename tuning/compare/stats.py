"""The verdict rule: is a candidate's change of one metric real, with runs as the unit?

Each run's summary number (its mean TTFT, its output throughput, ...) is one observation, because
repeats (separate server starts) are the independent units; the requests of one run share a
server, a warm-up and a moment of machine noise, so resampling requests would overstate the
confidence. The rule:

- either side has fewer than ``MIN_RUNS`` measured runs -> "inconclusive";
- the bootstrap CI of the difference of means excludes 0, so does Welch's t-interval (the
  bootstrap alone is far too confident with 2-4 runs a side), and the change is at least
  ``MIN_EFFECT``, measured symmetrically as |log(mean_c / mean_b)| -> "better" or "worse" by the
  metric's direction;
- otherwise -> "no clear difference".

Each side's resamples come from a generator seeded by the side's own (sorted) values, so the
result does not depend on which side is the baseline: swapping them negates every draw and flips
better <-> worse exactly.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from tuning.compare.catalog import Direction

# "not applied": the engine did not run with a side's value (tuning.effective), so no verdict.
VerdictName = Literal["better", "worse", "no clear difference", "inconclusive", "not applied"]

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20240601
MIN_EFFECT = 0.02
MIN_RUNS = 2


@dataclass(frozen=True)
class Change:
    """Candidate vs baseline for one metric: point change and bootstrap CI of the change."""

    base_mean: float | None
    cand_mean: float | None
    rel_change: float | None  # (mean_c - mean_b) / mean_b
    rel_low: float | None  # CI of the relative change (None if mean_b can be 0)
    rel_high: float | None
    diff_low: float | None  # CI of mean_c - mean_b
    diff_high: float | None
    n_base: int
    n_cand: int
    verdict: VerdictName
    note: str = ""


def normal_quantile(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _finite_sorted(values: Sequence[float | None]) -> np.ndarray:
    return np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], float))


def _side_rng(seed: int, values: np.ndarray) -> np.random.Generator:
    """A generator that depends only on the seed and this side's values, not on its role."""
    return np.random.default_rng([seed, zlib.crc32(values.tobytes()), values.size])


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = _side_rng(seed, values)
    idx = rng.integers(0, values.size, size=(resamples, values.size))
    return values[idx].mean(axis=1)


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.percentile(draws, [alpha * 100, (1 - alpha) * 100])
    return float(lo), float(hi)


def mean_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """Bootstrap percentile CI of the mean of per-run values; None under 2 runs."""
    vals = _finite_sorted(values)
    if vals.size < 2:
        return None
    return _percentiles(_resampled_means(vals, resamples, seed), confidence)


def _effect_size(mb: float, mc: float) -> float:
    """|log(mean_c / mean_b)|: the same size for a change and its reverse."""
    if mb == mc:
        return 0.0
    if mb <= 0 or mc <= 0:
        return math.inf
    return abs(math.log(mc / mb))


def bootstrap_change(
    base: Sequence[float],
    cand: Sequence[float],
    better: Direction = "lower",
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    min_effect: float = MIN_EFFECT,
    min_runs: int = MIN_RUNS,
) -> Change:
    """The verdict for one metric from per-run values (one number per run, runs as the unit).

    Each side is resampled with replacement `resamples` times (independently); the interval of
    mean_c - mean_b is the wider of the percentile bootstrap's and Welch's, it decides the sign,
    and the relative change must reach `min_effect` so a statistically clear but negligible shift
    is not sold as better or worse.
    """
    b, c = _finite_sorted(base), _finite_sorted(cand)
    mb = float(b.mean()) if b.size else None
    mc = float(c.mean()) if c.size else None
    rel = None if mb is None or mc is None or mb == 0 else (mc - mb) / mb
    if mb is None or mc is None or b.size < min_runs or c.size < min_runs:
        note = (
            "no measured run on one side"
            if not b.size or not c.size
            else f"{min(b.size, c.size)} run on one side: repeat the values to get a verdict"
        )
        return Change(mb, mc, rel, None, None, None, None, b.size, c.size, "inconclusive", note)
    bm = _resampled_means(b, resamples, seed)
    diffs = _resampled_means(c, resamples, seed) - bm
    d_lo, d_hi = _percentiles(diffs, confidence)
    w_lo, w_hi = welch_interval(b, c, confidence)
    d_lo, d_hi = min(d_lo, w_lo), max(d_hi, w_hi)
    r_lo = r_hi = None
    if np.all(bm != 0):
        r_lo, r_hi = _percentiles(diffs / bm, confidence)
        if mb != 0:
            r_lo, r_hi = min(r_lo, w_lo / mb), max(r_hi, w_hi / mb)
    verdict: VerdictName = "no clear difference"
    if (d_lo > 0 or d_hi < 0) and _effect_size(mb, mc) >= math.log1p(min_effect):
        verdict = "better" if (d_lo > 0) == (better == "higher") else "worse"
    return Change(mb, mc, rel, r_lo, r_hi, d_lo, d_hi, b.size, c.size, verdict)


# Two-sided 95 % Student t quantiles by degrees of freedom (1..30); beyond that, the normal's.
# fmt: off
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)
# fmt: on


def _t_quantile(df: float, confidence: float) -> float:
    if abs(confidence - 0.95) > 1e-9:
        # rough small-sample widening of the normal's for other levels
        return normal_quantile(confidence) * (1.0 + 1.0 / max(df, 1.0))
    k = int(max(1.0, math.floor(df)))
    return _T975[k - 1] if k <= len(_T975) else normal_quantile(confidence)


def welch_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t-interval of mean_c - mean_b. With 2-4 runs a side the percentile bootstrap is far
    too narrow (two runs give only three possible resampled means), so a verdict also needs this
    interval, which widens honestly with few runs, to exclude 0."""
    nb, nc = base.size, cand.size
    diff = float(cand.mean() - base.mean())
    vb = float(base.var(ddof=1)) / nb if nb > 1 else 0.0
    vc = float(cand.var(ddof=1)) / nc if nc > 1 else 0.0
    se = math.sqrt(vb + vc)
    if se == 0.0:
        return diff, diff
    denom = (vb * vb / (nb - 1) if nb > 1 else 0.0) + (vc * vc / (nc - 1) if nc > 1 else 0.0)
    df = (vb + vc) ** 2 / denom if denom > 0 else float(nb + nc - 2)
    t = _t_quantile(df, confidence)
    return diff - t * se, diff + t * se


@dataclass(frozen=True)
class NoiseFloor:
    """How much one configuration moves between repeats (the A/A noise)."""

    n: int
    mean: float | None
    cv: float | None  # std (ddof=1) / mean across runs
    min_detectable: float | None  # ~ smallest relative change two sides of n runs can resolve


def noise_floor(values: Sequence[float], confidence: float = CONFIDENCE) -> NoiseFloor:
    """From repeats of one configuration: z * cv * sqrt(2 / n) is roughly the smallest relative
    change a comparison of two sides of n runs each could call (why a 1 % win needs many
    repeats)."""
    arr = _finite_sorted(values)
    if arr.size < 2 or arr.mean() == 0:
        return NoiseFloor(arr.size, float(arr.mean()) if arr.size else None, None, None)
    cv = float(arr.std(ddof=1) / abs(arr.mean()))
    z = normal_quantile(confidence)
    return NoiseFloor(arr.size, float(arr.mean()), cv, z * cv * math.sqrt(2.0 / arr.size))
