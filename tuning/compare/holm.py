"""Holm's step-down over the primary metrics of one comparison (an objective and its guards): the
family-wise rate of false "better" / "worse" claims held at `alpha` across them, for one look.

The verdict rule (stats.bootstrap_change) is an interval that widens as its confidence grows, so
Holm's step-down reads directly on intervals: with m metrics and r of them already decided better
or worse, every metric still open is judged at confidence 1 - alpha / (m - r); those whose
interval now excludes no change are decided, r grows, and the next step is judged at the looser
level, until a step decides nothing. That is Holm's procedure exactly (the k-th smallest p-value
against alpha / (m - k + 1)), since a metric decided at level a is decided at every looser level.

A metric left open is read at the Bonferroni level 1 - alpha / m (Holm's first, strictest step):
"equivalent" when that interval lies within the margin, "undecided" otherwise. Equivalence claims
do not advance the step-down (only a rejected "no change" does), and reading them at the strictest
level keeps them, too, within alpha family-wise (every interval at 1 - alpha / m covers its truth
together with probability >= 1 - alpha).

Each verdict's Change keeps the confidence it was judged at (`Change.confidence`), so every
surface shows the interval the decision rests on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.stats import MARGIN, RESAMPLES, SEED, Change, Values, bootstrap_change

# The verdicts that reject "no change" (they step Holm's procedure down).
REJECTED = frozenset({"better", "worse", "changed"})
# (metric key, confidence) -> the verdict's Change at that confidence.
Judge = Callable[[str, float], Change]


def step_down(keys: Sequence[str], alpha: float, judge: Judge) -> dict[str, Change]:
    """Holm over `keys` at family-wise `alpha`, each metric judged by `judge(key, confidence)`;
    the Change each metric ends with (see the module docstring)."""
    m = len(keys)
    if not m:
        return {}
    out: dict[str, Change] = {}
    while len(out) < m:
        confidence = 1.0 - alpha / (m - len(out))
        new = {
            k: change
            for k in keys
            if k not in out and (change := judge(k, confidence)).verdict in REJECTED
        }
        if not new:
            break
        out.update(new)
    strictest = 1.0 - alpha / m
    for key in keys:
        if key not in out:
            out[key] = judge(key, strictest)
    return {k: out[k] for k in keys}


def holm(
    base: Mapping[str, Values],
    cand: Mapping[str, Values],
    keys: Sequence[str],
    alpha: float,
    *,
    margin: float = MARGIN,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    estimate: bool = True,
) -> dict[str, Change]:
    """Holm over the metrics `keys` (catalogue keys: each metric's direction and scale) of one
    candidate against the baseline, from per-run values (metric -> one number per run)."""

    def judge(key: str, confidence: float) -> Change:
        metric = METRIC_BY_KEY[key]
        return bootstrap_change(
            base.get(key) or [],
            cand.get(key) or [],
            metric.better,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
            margin=margin,
            estimate=estimate,
            metric_scale=metric.scale,
        )

    return step_down(keys, alpha, judge)
