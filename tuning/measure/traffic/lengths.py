"""Samplers for `LengthDist`: integer lengths from a seeded numpy Generator, and their expected
mean and spread (what the preview shows before anything is drawn, and what tests hold samples to).

The uniform kind draws exactly as vLLM's random dataset does (`rng.integers(low, high + 1)` with
low = floor(L*(1-r)), high = ceil(L*(1+r))), so the same seed gives the same lengths.
"""

from __future__ import annotations

import math

import numpy as np

from tuning.measure.traffic.spec import LengthDist


def uniform_bounds(dist: LengthDist) -> tuple[int, int]:
    """vLLM's integer range for a range ratio, before clipping."""
    low = math.floor(dist.mean * (1 - dist.range_ratio))
    high = math.ceil(dist.mean * (1 + dist.range_ratio))
    return low, high


def _lognormal_params(mean: float, std: float) -> tuple[float, float]:
    """mu, sigma of the underlying normal for lengths of this mean and standard deviation."""
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def sample(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` lengths as int64, rounded and clipped to [minimum, maximum]."""
    if dist.kind == "fixed":
        raw = np.full(n, float(dist.mean))
    elif dist.kind == "uniform":
        low, high = uniform_bounds(dist)
        raw = rng.integers(low, high + 1, size=n).astype(float)
    elif dist.kind == "normal":
        raw = rng.normal(dist.mean, dist.std, size=n)
    elif dist.kind == "lognormal":
        mu, sigma = _lognormal_params(dist.mean, dist.std)
        raw = rng.lognormal(mu, sigma, size=n)
    else:
        weights = np.array([b.weight for b in dist.bins], dtype=float)
        picks = rng.choice(len(dist.bins), size=n, p=weights / weights.sum())
        lows = np.array([b.low for b in dist.bins])[picks]
        highs = np.array([b.high for b in dist.bins])[picks]
        raw = rng.integers(lows, highs + 1).astype(float)
    upper = np.inf if dist.maximum is None else dist.maximum
    return np.clip(np.rint(raw), dist.minimum, upper).astype(np.int64)


def expected(dist: LengthDist) -> tuple[float, float]:
    """(mean, standard deviation) of the lengths the spec asks for, before rounding and clipping.

    Histogram bins are discrete uniform ranges: a bin low..high has mean (low+high)/2 and variance
    ((high-low+1)^2 - 1)/12.
    """
    if dist.kind == "fixed":
        return float(dist.mean), 0.0
    if dist.kind == "uniform":
        low, high = uniform_bounds(dist)
        return (low + high) / 2, math.sqrt(((high - low + 1) ** 2 - 1) / 12)
    if dist.kind in ("normal", "lognormal"):
        return float(dist.mean), float(dist.std)
    total = sum(b.weight for b in dist.bins)
    mean = sum(b.weight * (b.low + b.high) / 2 for b in dist.bins) / total
    second = sum(
        b.weight * (((b.high - b.low + 1) ** 2 - 1) / 12 + ((b.low + b.high) / 2) ** 2)
        for b in dist.bins
    )
    return mean, math.sqrt(max(second / total - mean**2, 0.0))


def upper_bound(dist: LengthDist) -> int | None:
    """The largest length this spec can draw, or None when unbounded (normal/lognormal tails)."""
    if dist.maximum is not None:
        return dist.maximum
    if dist.kind == "fixed":
        return int(dist.mean)
    if dist.kind == "uniform":
        return uniform_bounds(dist)[1]
    if dist.kind == "histogram":
        return max(b.high for b in dist.bins)
    return None
