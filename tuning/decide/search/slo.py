"""Does one value of a search meet its SLOs? Judged from the interval over its repeats, never
from one run: each SLO (`--goodput tpot:20`: p99 TPOT <= 20 ms) is checked on the mean of the
value's per-run p99s, with the verdicts' interval of one side's mean
(tuning.compare.stats.mean_interval, runs as the unit):

- **met** when the interval lies under the limit (its upper bound <= the limit),
- **failed** when it lies above (its lower bound > the limit),
- **undecided** when it straddles the limit,
- **tried once** with one measured run (no spread, so no interval yet: never met, never failed).

A value meets its SLOs when every SLO is met: an intersection of one-sided claims, so it needs no
correction over the SLOs. It fails them when any SLO failed: a union, so each SLO's "failed" is
judged at the confidence split over the SLOs (Bonferroni), and a value is not ruled out by the
luck of having several SLOs. A run's own p99 over the limit is a fact of that run, not a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tuning.compare.stats import CONFIDENCE, MIN_RUNS, mean_interval

MET, FAILED, UNDECIDED, ONCE, NO_SLO = "met", "failed", "undecided", "tried once", "no SLO"


def slo_key(name: str) -> str:
    """The run column an SLO is checked on: 'tpot' -> 'p99_tpot_ms'."""
    return f"p99_{name}_ms"


@dataclass(frozen=True)
class SloCheck:
    """One SLO of one value: the limit, the mean of the per-run p99s and its interval."""

    name: str
    limit: float
    runs: int
    mean: float | None
    low: float | None
    high: float | None
    state: str  # MET, FAILED, UNDECIDED or ONCE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SloState:
    """A value against all its SLOs: `state` (MET, FAILED, UNDECIDED, ONCE, or NO_SLO when the
    search has none) and one check per SLO."""

    state: str
    checks: tuple[SloCheck, ...] = ()
    confidence: float = CONFIDENCE

    @property
    def feasible(self) -> bool:
        """Known to meet every SLO (or there is none)."""
        return self.state in (MET, NO_SLO)

    @property
    def possible(self) -> bool:
        """Not known to break one: it may still meet them all."""
        return self.state != FAILED

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "confidence": self.confidence,
            "checks": [c.to_json() for c in self.checks],
        }


def check_one(
    name: str, limit: float, values: Sequence[float], confidence: float, m: int
) -> SloCheck:
    """One SLO from the per-run p99s of one value; `m` SLOs share the "failed" claim's alpha."""
    n = len(values)
    mean = sum(values) / n if n else None
    if n < MIN_RUNS:
        return SloCheck(name, limit, n, mean, None, None, ONCE)
    shown = mean_interval(values, confidence)
    strict = mean_interval(values, 1.0 - (1.0 - confidence) / m) if m > 1 else shown
    assert shown is not None and strict is not None  # MIN_RUNS finite values
    if shown[1] <= limit:
        return SloCheck(name, limit, n, mean, shown[0], shown[1], MET)
    # above the limit: the interval shown is the one the "failed" claim is judged on
    state = FAILED if strict[0] > limit else UNDECIDED
    low, high = strict if shown[0] > limit else shown
    return SloCheck(name, limit, n, mean, low, high, state)


def slo_state(
    per_run: Mapping[str, Sequence[float]],
    slo_ms: Mapping[str, float],
    confidence: float = CONFIDENCE,
) -> SloState:
    """A value's SLO state from its measured runs' p99s (`per_run`: SLO name -> one per run)."""
    if not slo_ms:
        return SloState(NO_SLO, (), confidence)
    m = len(slo_ms)
    checks = tuple(
        check_one(name, limit, list(per_run.get(name) or ()), confidence, m)
        for name, limit in slo_ms.items()
    )
    states = {c.state for c in checks}
    if FAILED in states:
        state = FAILED
    elif states == {MET}:
        state = MET
    elif ONCE in states:
        state = ONCE
    else:
        state = UNDECIDED
    return SloState(state, checks, confidence)


def under_limits(run: Mapping[str, Any], slo_ms: Mapping[str, float]) -> bool | None:
    """This one run's p99s under every limit (a fact of the run, not a verdict); None without
    SLOs or a p99 missing."""
    if not slo_ms:
        return None
    values = [run.get(slo_key(name)) for name in slo_ms]
    if any(v is None for v in values):
        return None
    return all(float(v or 0) <= limit for v, limit in zip(values, slo_ms.values(), strict=True))
