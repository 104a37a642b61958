"""How long each run's load should be for the fastest decision, from what the first runs measured.

A decision between two values needs about n(L) runs a side, and each run costs S + L seconds: S its
start, warm-up, stop and storing (measured, tuning.experiment.estimate), L its load. The run-to-run
spread sigma(L) of the objective has two parts: noise within a run, which a longer load averages
away (its variance falls as 1/L; measured from each run's own requests, split into windows of its
load), and noise between runs that no load length removes (a restart's luck, the machine). So

    sigma(L)^2 = tau^2 + w^2 * L0 / L,    n(L) = max(2, ceil(2 (z_a + z_b)^2 sigma(L)^2 / d^2)),
    time to a decision(L) = 2 n(L) (S + L),

with L0 the load measured, w its within-run part, tau the rest, d the change to resolve (the one
seen, at least MIN_EFFECT), z_a and z_b the two-sided 95 % and 80 % power quantiles. `advise`
tries the load at a few multiples of today's (requests per run scale with it) and says the trade
("30 s runs: about 3 runs a side; 10 s runs: about 9") and, when longer loads win, by how much
time. A planning model, in the same words as the stopping rule, not a promise: it rests on two
sides' first runs. Pure: numbers in, advice out (the CLI reads the store: tuning.cli.estimate).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ALPHA, POWER = 0.05, 0.8
MIN_EFFECT = 0.02  # a relative change smaller than this is not worth planning for
FACTORS = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)  # load lengths tried, times today's
WINDOWS = 4  # a run's load split in this many windows to see its own noise
SOONER = 0.9  # another length is advised only when it decides in at most 90 % of the time


@dataclass(frozen=True)
class Option:
    """One load length: requests per run, its load in seconds, runs a side to a decision and the
    seconds that takes (both sides, starts included)."""

    requests: int
    load_s: float
    runs_a_side: int
    seconds: float


@dataclass(frozen=True)
class LoadAdvice:
    """Today's load length and the fastest one, with what the model rests on."""

    current: Option
    best: Option
    options: tuple[Option, ...]
    start_s: float
    spread: float  # relative run-to-run spread at today's load
    within: float  # its part from noise within a run (relative)
    effect: float  # the relative change planned for

    @property
    def sooner(self) -> bool:
        """Whether another load length decides clearly sooner (in at most SOONER of the time)."""
        return self.best != self.current and self.best.seconds <= SOONER * self.current.seconds

    @property
    def longer_is_faster(self) -> bool:
        return self.sooner and self.best.requests > self.current.requests

    def line(self) -> str:
        """One line with the numbers: the trade, and the advice when another length is faster."""
        trade = "; ".join(
            f"{_s(o.load_s)} runs: about {o.runs_a_side} a side"
            for o in _trade(self.current, self.best)
        )
        basis = (
            f"(start and the rest {_s(self.start_s)} a run, run-to-run spread "
            f"{self.spread:.0%}, {self.within:.0%} of it within a run, a {self.effect:.0%} change)"
        )
        now = f"{self.current.requests:,} requests, {_s(self.current.load_s)} of load a run"
        if self.sooner:
            saved = self.current.seconds - self.best.seconds
            than = " than more restarts" if self.longer_is_faster else ""
            return (
                f"load length: {now} decides in about {_min(self.current.seconds)}; "
                f"{self.best.requests:,} requests a run ({trade}) would decide about "
                f"{_min(saved)} sooner{than} {basis}"
            )
        return (
            f"load length: {now} is about right for the noise seen ({trade}; about "
            f"{_min(self.current.seconds)} to a decision) {basis}"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sooner"], out["longer_is_faster"] = self.sooner, self.longer_is_faster
        out["line"] = self.line()
        return out


def _trade(current: Option, best: Option) -> list[Option]:
    return sorted({current, best}, key=lambda o: -o.load_s)


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def _min(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def runs_a_side(variance: float, effect: float) -> int:
    """Runs a side for a two-sided test at ALPHA with POWER to see a relative change `effect`
    when one run's relative variance is `variance` (at least 2: a verdict needs two a side)."""
    z = statistics.NormalDist()
    k = z.inv_cdf(1 - ALPHA / 2) + z.inv_cdf(POWER)
    return max(2, math.ceil(2 * k * k * variance / (effect * effect)))


def advise(
    *, start_s: float, load_s: float, requests: int, spread: float, within: float, effect: float
) -> LoadAdvice:
    """The advice for runs that cost `start_s` besides a load of `load_s` seconds (`requests`
    requests), whose objective spreads `spread` (relative sd) run to run, `within` of it from
    noise within a run, to resolve a relative change `effect` (at least MIN_EFFECT)."""
    if load_s <= 0 or requests < 1 or start_s < 0:
        raise ValueError("load length advice needs a measured load and start")
    d = max(abs(effect), MIN_EFFECT)
    w2 = min(within, spread) ** 2
    tau2 = max(0.0, spread**2 - w2)
    options = []
    for factor in FACTORS:
        n_req = max(1, round(requests * factor))
        length = load_s * n_req / requests
        n = runs_a_side(tau2 + w2 * load_s / length, d)
        options.append(Option(n_req, length, n, 2 * n * (start_s + length)))
    current = next(o for o in options if o.requests == requests)
    best = min(options, key=lambda o: (o.seconds, o.requests))
    return LoadAdvice(current, best, tuple(options), start_s, spread, min(within, spread), d)


# -- the noise, from the runs' own numbers ---------------------------------------------------------
def within_run_cv(requests: Sequence[Mapping[str, Any]], windows: int = WINDOWS) -> float | None:
    """How much a run's output throughput moves from noise within it (relative sd of the run's
    mean): its load split in `windows` equal spans by the end of each successful request, tokens
    per second in each; None when too few requests finished to say."""
    done = [r for r in requests if r.get("ok") and r.get("end") is not None]
    if len(done) < 2 * windows:
        return None
    start = min(float(r["start"]) for r in done)
    span = max(float(r["end"]) for r in done) - start
    if span <= 0:
        return None
    tokens = [0.0] * windows
    for r in done:
        at = min(windows - 1, int((float(r["end"]) - start) / span * windows))
        tokens[at] += float(r.get("output_tokens") or 0)
    rates = [t / (span / windows) for t in tokens]
    mean = statistics.fmean(rates)
    if mean <= 0:
        return None
    return statistics.stdev(rates) / math.sqrt(windows) / mean


def pooled_cv(sides: Sequence[Sequence[float]]) -> float | None:
    """The run-to-run spread of the objective, each side's variance pooled, relative to the mean
    of all runs; None without two runs on some side."""
    kept = [[v for v in side if math.isfinite(v)] for side in sides]
    df = sum(len(s) - 1 for s in kept if len(s) >= 2)
    every = [v for s in kept for v in s]
    if df < 1 or not every or statistics.fmean(every) == 0:
        return None
    ss = sum((len(s) - 1) * statistics.variance(s) for s in kept if len(s) >= 2)
    return math.sqrt(ss / df) / abs(statistics.fmean(every))


def observed_effect(sides: Sequence[Sequence[float]]) -> float:
    """The relative change between the first side (the baseline) and the farthest other."""
    means = [statistics.fmean(s) for s in sides if s]
    if len(means) < 2 or means[0] == 0:
        return 0.0
    return max(abs(m - means[0]) / abs(means[0]) for m in means[1:])
