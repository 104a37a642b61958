"""The verdict rule: is a candidate's change of one metric real, with runs as the unit?

Each run's summary number (its mean TTFT, its output throughput, ...) is one observation, because
repeats (separate server starts) are the independent units; the requests of one run share a
server, a warm-up and a moment of machine noise, so resampling requests would overstate the
confidence.

The change is judged on the scale where it is a change of a positive quantity: the **log scale**
of the ratio mean_c / mean_b whenever every run of both sides is above 0 (throughputs, latencies,
memory). An interval of log(mean_c / mean_b) maps to a % change as exp(lo) - 1 .. exp(hi) - 1, so
it can never fall below -100 %, and a 10x drop with two runs a side is as clear as a 10x rise;
the interval of mean_c - mean_b divided by mean_b (the old rule) read "-91.6 %, 95 % CI -185.7 ...
+2.4 %" for four H200 runs whose ratio excludes 1 by far. Metrics that can be zero or negative (a
value <= 0 in any run: preemptions, failed requests) have no ratio and keep the **difference
scale**, mean_c - mean_b; a non-negative one's interval is clipped at -mean_b (-100 %).

On either scale the interval is the wider of the percentile bootstrap over runs and Student's t
(Welch's for two sides; on the log scale its standard error is the delta method's, each side's
CV / sqrt(n)): the bootstrap alone is far too confident with 2-4 runs a side (two runs give only
three possible resampled means, so its "CI" is their min-max). Three verdicts, never confused:

- **equivalent**: the interval lies within ±E: ±log(1 + E) on the log scale (E = `MARGIN`;
  symmetric in log so that swapping the sides keeps the verdict: -1.96 % .. +2 % for E = 2 %),
  ±E x |mean_b| on the difference scale: whatever the change is, it is smaller than E;
- **better** / **worse** (by the metric's direction): the interval excludes no change;
  **changed** for a metric with no better direction (catalog: peak KV-cache usage);
- **undecided**: neither, including any side with fewer than ``MIN_RUNS`` measured runs (one run
  has no spread, so never better or worse). An undecided verdict carries `MoreRuns`: how many
  further runs a side would likely decide it, from the observed spread on the verdict's scale
  (`more_runs`).

A metric the catalogue reads as a **difference** (`Metric.scale`: counts and fractions that are
often 0, such as preemptions or peak KV usage) is judged on the difference scale whatever its
values, and has no % change at all: 0.02 % -> 0.04 % of KV usage is +0.02 points, never "+100 %".

Each side's resamples come from a generator seeded by the side's own (sorted) values, so the
result does not depend on which side is the baseline: swapping them negates every draw (of the
difference or of the log ratio) and flips better <-> worse exactly. Chart whiskers are the same
rule applied to one side's mean (`mean_interval`): on the log scale for positive values, so a
whisker never goes below 0.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from tuning.compare.catalog import Direction
from tuning.compare.catalog import Scale as MetricScale
from tuning.compare.tdist import t_quantile

# "not applied": the engine did not run with a side's value (tuning.engine.effective), so no
# verdict.
# "changed": a real change of a metric with no better direction (catalog.Direction "neither").
VerdictName = Literal["better", "worse", "changed", "equivalent", "undecided", "not applied"]
VERDICTS: tuple[VerdictName, ...] = (
    "better",
    "worse",
    "changed",
    "equivalent",
    "undecided",
    "not applied",
)
DECIDED: frozenset[str] = frozenset({"better", "worse", "changed", "equivalent"})
Goal = Literal["difference", "equivalence"]
# The scale a change is judged on: log(mean_c / mean_b), or mean_c - mean_b when a run is <= 0.
Scale = Literal["log", "difference"]
Values = Sequence[float | None] | np.ndarray  # one number per run

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20240601
MARGIN = 0.02  # the equivalence margin E, as a fraction of the baseline's mean
MIN_RUNS = 2
MAX_MORE_RUNS = 50  # beyond this many further runs a side, an estimate reads "many"
POWER = 0.8  # the repeat estimate aims at this chance of deciding, not a coin flip


@dataclass(frozen=True)
class MoreRuns:
    """How many further runs a side would likely turn an undecided verdict into a decided one."""

    runs: int | None  # None: more than MAX_MORE_RUNS ("many")
    goal: Goal  # which verdict the estimate aims at: a difference, or equivalence
    basis: str  # what the estimate rests on, in words

    @property
    def text(self) -> str:
        if self.runs is None:
            return f"many more runs a side (over {MAX_MORE_RUNS}) would be needed"
        return (
            f"≈ {self.runs} more run{'s' if self.runs != 1 else ''} a side would likely decide it"
        )

    def to_json(self) -> dict[str, object]:
        return {"runs": self.runs if self.runs is not None else "many", "goal": self.goal}


@dataclass(frozen=True)
class Change:
    """Candidate vs baseline for one metric: point change, its interval and the verdict."""

    base_mean: float | None
    cand_mean: float | None
    rel_change: float | None  # (mean_c - mean_b) / mean_b
    # The verdict's interval as a change relative to mean_b (None if mean_b <= 0): on the log
    # scale exp(log_low) - 1 .. exp(log_high) - 1; never below -1 for a non-negative quantity.
    rel_low: float | None
    rel_high: float | None
    diff_low: float | None  # the same interval in the metric's unit, of mean_c - mean_b
    diff_high: float | None
    n_base: int
    n_cand: int
    verdict: VerdictName
    note: str = ""
    margin: float = MARGIN
    more: MoreRuns | None = None  # only for an undecided verdict
    scale: Scale = "difference"  # the scale the verdict was judged on
    log_low: float | None = None  # the interval of log(mean_c / mean_b), on the log scale only
    log_high: float | None = None
    sd_base: float | None = None  # each side's standard deviation across runs (None under 2)
    sd_cand: float | None = None
    confidence: float = CONFIDENCE  # the level the interval was computed at

    @property
    def diff(self) -> float | None:
        """mean_c - mean_b in the metric's unit (None when a side has no measured run)."""
        if self.base_mean is None or self.cand_mean is None:
            return None
        return self.cand_mean - self.base_mean

    def cv(self, side: Literal["base", "cand"]) -> float | None:
        """One side's run-to-run coefficient of variation (None without a spread or a mean)."""
        sd, mean = (
            (self.sd_base, self.base_mean) if side == "base" else (self.sd_cand, self.cand_mean)
        )
        return None if sd is None or not mean else sd / abs(mean)


def finite_sorted(values: Values) -> np.ndarray:
    return np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], float))


def _side_rng(seed: int, values: np.ndarray) -> np.random.Generator:
    """A generator that depends only on the seed and this side's values, not on its role."""
    return np.random.default_rng([seed, zlib.crc32(values.tobytes()), values.size])


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The bootstrap means of one side's values (read-only). They depend only on the values, so
    they are drawn once: a baseline is paired with every candidate, and the charts' whiskers ask
    again for every side and metric."""
    return bootstrap_means(np.asarray(values, float).tobytes(), resamples, seed)


@functools.lru_cache(maxsize=512)  # 2,000 means a side: 16 kB each
def bootstrap_means(raw: bytes, resamples: int, seed: int) -> np.ndarray:
    """`resamples` means of the float64 values in `raw`, each of a resample with replacement."""
    values = np.frombuffer(raw, dtype=float)
    rng = _side_rng(seed, values)
    idx = rng.integers(0, values.size, size=(resamples, values.size))
    means = values[idx].mean(axis=1)
    means.flags.writeable = False
    return means


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.percentile(draws, [alpha * 100, (1 - alpha) * 100])
    return float(lo), float(hi)


def _welch_df(vb: float, nb: int, vc: float, nc: int) -> float:
    """Welch-Satterthwaite degrees of freedom of var_b/n_b + var_c/n_c (var/n given)."""
    denom = (vb * vb / (nb - 1) if nb > 1 else 0.0) + (vc * vc / (nc - 1) if nc > 1 else 0.0)
    return (vb + vc) ** 2 / denom if denom > 0 else float(max(1, nb + nc - 2))


def t_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t-interval of mean_c - mean_b; with `base` empty, Student's t-interval of mean_c.
    Each side that counts needs 2 runs or more."""
    nc = cand.size
    vc = float(cand.var(ddof=1)) / nc
    if base.size:
        nb = base.size
        vb = float(base.var(ddof=1)) / nb
        centre = float(cand.mean() - base.mean())
        df = _welch_df(vb, nb, vc, nc)
    else:
        vb, centre, df = 0.0, float(cand.mean()), float(nc - 1)
    return _t_around(centre, vb, vc, df, confidence)


def log_t_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t-interval of log(mean_c / mean_b) (log(mean_c) with `base` empty), its standard
    error by the delta method: var(log mean) ~ CV^2 / n per side. Centred on the log of the
    ratio of the means the table shows, not of geometric means. Values must be > 0."""
    nc, mc = cand.size, float(cand.mean())
    vc = float(cand.var(ddof=1)) / (nc * mc * mc)
    if base.size:
        nb, mb = base.size, float(base.mean())
        vb = float(base.var(ddof=1)) / (nb * mb * mb)
        centre = math.log(mc) - math.log(mb)
        df = _welch_df(vb, nb, vc, nc)
    else:
        vb, centre, df = 0.0, math.log(mc), float(nc - 1)
    return _t_around(centre, vb, vc, df, confidence)


def _t_around(
    centre: float, vb: float, vc: float, df: float, confidence: float
) -> tuple[float, float]:
    se = math.sqrt(vb + vc)
    if se == 0.0:
        return centre, centre
    t = t_quantile(confidence, df)
    return centre - t * se, centre + t * se


def scale_of(base: Values, cand: Values) -> Scale:
    """'log' when every finite run value of both sides is above 0 (a ratio exists), else
    'difference': decided from both sides together, so swapping them keeps the scale."""
    b, c = finite_sorted(base), finite_sorted(cand)
    return "log" if (b.size or c.size) and bool((b > 0).all() and (c > 0).all()) else "difference"


def _short(b: np.ndarray, c: np.ndarray, counts_base: bool) -> bool:
    return c.size < MIN_RUNS or (counts_base and b.size < MIN_RUNS)


def interval(
    base: Values,
    cand: Values,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """The difference scale's interval: of mean(cand) - mean(base), or of mean(cand) alone when
    `base` is empty; the wider of the percentile bootstrap over runs and Student's/Welch's t.
    None when a side that counts has fewer than MIN_RUNS finite values. For metrics with a run
    <= 0; positive ones use `log_interval` (see `change_interval`)."""
    return _wider(base, cand, False, confidence, resamples, seed)


def log_interval(
    base: Values,
    cand: Values,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """The log scale's interval: of log(mean(cand) / mean(base)), or of log(mean(cand)) when
    `base` is empty; the wider of the percentile bootstrap of the log ratio of resampled means
    (each side seeded by its own values) and `log_t_interval`. None when a side that counts has
    fewer than MIN_RUNS finite values, or any value is <= 0 (no logarithm)."""
    return _wider(base, cand, True, confidence, resamples, seed)


def _wider(
    base: Values, cand: Values, log: bool, confidence: float, resamples: int, seed: int
) -> tuple[float, float] | None:
    """The wider of the bootstrap and the t-interval, on the difference or the log scale."""
    b, c = finite_sorted(base), finite_sorted(cand)
    if _short(b, c, bool(len(base))) or (log and ((b <= 0).any() or (c <= 0).any())):
        return None
    draws = _resampled_means(c, resamples, seed)
    if log:
        draws = np.log(draws)
    if b.size:
        other = _resampled_means(b, resamples, seed)
        draws = draws - (np.log(other) if log else other)
    lo, hi = _percentiles(draws, confidence)
    t_lo, t_hi = (log_t_interval if log else t_interval)(b, c, confidence)
    return min(lo, t_lo), max(hi, t_hi)


def change_interval(
    base: Values,
    cand: Values,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    metric_scale: MetricScale = "ratio",
) -> tuple[Scale, float, float] | None:
    """THE interval a verdict is judged on, with its scale: `log_interval` when every value is
    above 0 and the metric is read as a ratio, `interval` (the difference) otherwise; None under
    MIN_RUNS runs a side."""
    scale = "difference" if metric_scale == "difference" else scale_of(base, cand)
    pick = log_interval if scale == "log" else interval
    ci = pick(base, cand, confidence, resamples, seed)
    return None if ci is None else (scale, ci[0], ci[1])


def mean_interval(
    values: Values,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """The interval of one side's mean (chart whiskers) by the verdicts' rule: on the log scale
    for positive values (mean x exp(lo) .. mean x exp(hi), never below 0), else the difference
    scale's, clipped at 0 when no value is negative (a count's mean cannot be). None under
    MIN_RUNS runs."""
    arr = finite_sorted(values)
    if scale_of((), arr) == "log":
        ci = log_interval((), arr, confidence, resamples, seed)
        return None if ci is None else (math.exp(ci[0]), math.exp(ci[1]))
    ci = interval((), arr, confidence, resamples, seed)
    if ci is None or (arr < 0).any():
        return ci
    return max(ci[0], 0.0), max(ci[1], 0.0)


def _spreads(b: np.ndarray, c: np.ndarray) -> tuple[float, float, str] | None:
    """Each side's standard deviation across runs; a side with one run borrows the other's CV."""
    sd_b = float(b.std(ddof=1)) if b.size >= 2 else None
    sd_c = float(c.std(ddof=1)) if c.size >= 2 else None
    if sd_b is None and sd_c is None:
        return None
    if sd_b is None or sd_c is None:
        known, other = (b, c) if sd_b is not None else (c, b)
        sd = float(known.std(ddof=1))
        mean = abs(float(known.mean()))
        borrowed = sd * abs(float(other.mean())) / mean if mean > 0 else sd
        cv = f"CV {sd / mean * 100:.1f} %" if mean > 0 else f"SD {sd:.3g}"
        basis = f"the spread of the side with runs ({cv}), borrowed by the one-run side"
        return (sd, borrowed, basis) if sd_b is not None else (borrowed, sd, basis)
    assert sd_b is not None and sd_c is not None
    return sd_b, sd_c, "the observed spread of both sides"


def more_runs(
    base: Values,
    cand: Values,
    *,
    confidence: float = CONFIDENCE,
    margin: float = MARGIN,
    power: float = POWER,
    cap: int = MAX_MORE_RUNS,
    metric_scale: MetricScale = "ratio",
) -> MoreRuns:
    """Further runs a side that would likely decide an undecided comparison (a power estimate).

    The observed means and spreads are taken as the truth, on the verdict's scale (`scale_of`):
    the change is log(mean_c / mean_b) and each side's spread its CV on the log scale (the delta
    method's, as `log_t_interval`), mean_c - mean_b and the SD on the difference scale. When the
    change lies outside the margin (±log(1 + margin), or ±margin x |mean_b|), the goal is an
    interval that excludes no change: the smallest k with (t(conf, df_k) + z(power)) * se_k <=
    |change|, where se_k and df_k are Welch's with k more runs a side at the observed spreads.
    When it lies inside, the goal is equivalence: (t + z) * se_k <= margin - |change|. More than
    `cap` runs reads as "many"; with one run a side there is no spread yet, and the answer is 1
    (the run that measures it).
    """
    b, c = finite_sorted(base), finite_sorted(cand)
    if not b.size or not c.size:
        short = max(MIN_RUNS - b.size, MIN_RUNS - c.size, 1)
        return MoreRuns(short, "difference", "no measured run on one side")
    mb, mc = float(b.mean()), float(c.mean())
    log = metric_scale == "ratio" and scale_of(b, c) == "log"
    change = abs(math.log(mc / mb)) if log else abs(mc - mb)
    band = math.log1p(margin) if log else margin * abs(mb)
    goal: Goal = "difference" if change > band else "equivalence"
    spreads = _spreads(b, c)
    if spreads is None:
        return MoreRuns(1, goal, "one run a side: the spread is not known yet")
    sd_b, sd_c, basis = spreads
    if log:  # the delta method: the SD of log(mean) is the CV
        sd_b, sd_c = sd_b / mb, sd_c / mc
    target = change if goal == "difference" else band - change
    if target <= 0:
        return MoreRuns(None, goal, basis)
    z = NormalDist().inv_cdf(power)

    def enough(k: int) -> bool:
        nb, nc = b.size + k, c.size + k
        vb, vc = sd_b * sd_b / nb, sd_c * sd_c / nc
        se = math.sqrt(vb + vc)
        return se == 0.0 or (t_quantile(confidence, _welch_df(vb, nb, vc, nc)) + z) * se <= target

    if not enough(cap):
        return MoreRuns(None, goal, basis)
    lo, hi = 0, cap  # enough(hi) holds; the half-width only shrinks as k grows: bisect
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return MoreRuns(hi, goal, basis)


def bootstrap_change(
    base: Values,
    cand: Values,
    better: Direction = "lower",
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    margin: float = MARGIN,
    estimate: bool = True,
    metric_scale: MetricScale = "ratio",
) -> Change:
    """The verdict for one metric from per-run values (one number per run, runs as the unit),
    on `change_interval`'s scale: equivalent when the interval lies within the margin
    (±log(1 + margin) on the log scale, ±margin x |mean_b| on the difference scale), better or
    worse (by `better`; changed when it has no better direction) when it excludes no change,
    undecided otherwise (with `more_runs`, unless `estimate` is False). A metric read as a
    difference (`metric_scale`) has no % change: rel_change and its interval stay None."""
    b, c = finite_sorted(base), finite_sorted(cand)
    mb = float(b.mean()) if b.size else None
    mc = float(c.mean()) if c.size else None
    ratio = metric_scale == "ratio"
    rel = None if mb is None or mc is None or mb == 0 or not ratio else (mc - mb) / mb
    sds = tuple(float(x.std(ddof=1)) if x.size >= 2 else None for x in (b, c))

    def estimate_more() -> MoreRuns | None:
        if not estimate:
            return None
        return more_runs(b, c, confidence=confidence, margin=margin, metric_scale=metric_scale)

    def undecided(note: str) -> Change:
        n = (b.size, c.size)
        return Change(
            mb, mc, rel, None, None, None, None, *n, "undecided", note, margin, estimate_more(),
            sd_base=sds[0], sd_cand=sds[1], confidence=confidence,
        )  # fmt: skip

    if mb is None or mc is None:
        return undecided("no measured run on one side")
    ci = change_interval(b, c, confidence, resamples, seed, metric_scale)
    if ci is None:
        return undecided(f"{min(b.size, c.size)} run on one side: no interval yet")
    scale, lo, hi = ci
    rel_ci: tuple[float, float] | None = None
    log_ci: tuple[float, float] | None = None
    if scale == "log":
        log_ci, rel_ci = (lo, hi), (math.expm1(lo), math.expm1(hi))
        diff_ci = (mb * rel_ci[0], mb * rel_ci[1])
        band = math.log1p(margin)
    else:
        if not (b < 0).any() and not (c < 0).any():
            lo, hi = max(lo, -mb), max(hi, -mb)  # a non-negative mean falls by 100 % at most
        diff_ci = (lo, hi)
        rel_ci = (lo / mb, hi / mb) if mb > 0 and ratio else None
        band = margin * abs(mb)
    verdict: VerdictName = "undecided"
    note = ""
    if -band <= lo and hi <= band:
        verdict = "equivalent"
        note = "a real change, smaller than the margin" if lo > 0 or hi < 0 else ""
    elif (lo > 0 or hi < 0) and better == "neither":
        verdict = "changed"
    elif lo > 0 or hi < 0:
        verdict = "better" if (lo > 0) == (better == "higher") else "worse"
    more = estimate_more() if verdict == "undecided" else None
    return Change(
        base_mean=mb,
        cand_mean=mc,
        rel_change=rel,
        rel_low=rel_ci[0] if rel_ci else None,
        rel_high=rel_ci[1] if rel_ci else None,
        diff_low=diff_ci[0],
        diff_high=diff_ci[1],
        n_base=b.size,
        n_cand=c.size,
        verdict=verdict,
        note=note,
        margin=margin,
        more=more,
        scale=scale,
        log_low=log_ci[0] if log_ci else None,
        log_high=log_ci[1] if log_ci else None,
        sd_base=sds[0],
        sd_cand=sds[1],
        confidence=confidence,
    )
