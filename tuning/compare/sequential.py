"""Repeat until decided: which values of an experiment still need runs, and how many, so that the
A/A false-alarm rate stays at or under `alpha` however many times the lab looks.

The runner (``experiment --repeats auto``) calls `plan_next` after every step with the runs so far,
in run order, and adds the interleaved rounds it asks for (one round = one baseline run, then one
run of each pending value). It is a pure function of those runs and the `Design`: no state to keep
or resume, the same runs always give the same plan.

The stopping rule: looks at a fixed schedule, alpha split across them (Bonferroni).
- A value is judged only at scheduled looks, when it and the baseline have n runs each,
  n in `Design.looks()` (2, 3, 5, 8, ... up to max_repeats: each about `growth` x the one before).
  Each look compares the first n runs of the value with the first n runs of the baseline, so a
  verdict never changes once given, however many runs the baseline gets for other values.
- Each of the L scheduled looks spends alpha / L, split over the watched metrics (the
  experiment's primaries: an objective and its guards, tuning.compare.primaries) by Holm's
  step-down (tuning.compare.holm): with m metrics, each judged by stats.bootstrap_change, the
  first step at 1 - alpha / (L m), then 1 - alpha / (L (m - 1)) once one is decided, and so on.
  A metric keeps the verdict of the first look that decided it (better, worse, equivalent); a
  value stops when every watched metric is decided.
- Holm holds the family-wise rate within a look: P(some metric of the look says better or worse |
  no real difference) <= alpha / L. By the union bound over looks, P(some metric at some look
  says better or worse) <= L x alpha / L = alpha, whatever the correlation between looks and
  between metrics, and for any noise the verdict's interval covers at its nominal level (the
  wider-of-bootstrap-and-Welch interval is conservative at these sizes).
  Why not Pocock or O'Brien-Fleming boundaries: they are exact only for normal statistics with a
  known variance and equal information steps; with 2-10 runs a side and an estimated variance,
  Student's t at the adjusted level is the honest building block, and the union bound needs no
  assumption about how looks correlate. Few looks (geometric schedule) keep the split cheap: 5
  looks for max_repeats 10, so each look runs at 99 % instead of 95 %.
- When the time budget ends between two scheduled looks, one last unscheduled look is taken at
  the runs reached, with all the alpha the skipped looks would have spent (alpha x (L - i) / L
  after i looks): the total stays alpha.
- Futility (from the third scheduled look, 5 runs a side): a value stops early, undecided, when
  every metric still undecided would likely stay so at max_repeats (stats.more_runs at the look's
  strictest Holm level and power 0.5, the observed change taken as the truth). Stopping early
  never adds a false alarm; it saves runs.
- A value whose runs produced no measurement twice in a row from the start is stopped as failed;
  attempts (measured or not) count against max_repeats.

The guarantee is per comparison (one value against the baseline), family-wise over its watched
metrics; for several values at once, divide alpha by their number (Bonferroni) if a rate over
values is wanted. benchmarks/aa_false_alarm.py measures the family-wise rate by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from tuning.compare.catalog import METRIC_BY_KEY, Direction
from tuning.compare.catalog import Scale as MetricScale
from tuning.compare.holm import step_down
from tuning.compare.primaries import Primaries
from tuning.compare.stats import (
    DECIDED,
    MARGIN,
    MIN_RUNS,
    RESAMPLES,
    Change,
    MoreRuns,
    VerdictName,
    bootstrap_change,
    more_runs,
)

Row = Mapping[str, Any]  # one run: metric key -> its value (None or missing: not measured)
State = Literal["decided", "pending", "futile", "capped", "failed", "budget"]
# What `--repeats auto` decides on unless told otherwise: the default primaries.
DEFAULT_METRICS: tuple[str, ...] = Primaries().keys
# Futility needs a spread and a change estimated from this many runs a side at least: from 2 or 3
# runs the estimate is too noisy, and stopping a real change there costs most of the power.
FUTILITY_MIN_RUNS = 5
# ... and stops a metric only when, were the observed change the truth, it would more likely than
# not stay undecided at max_repeats (power 0.5: the repeat estimate shown uses 0.8).
FUTILITY_POWER = 0.5


@dataclass(frozen=True)
class Design:
    """The stopping rule's settings. `alpha` is the A/A false-alarm rate allowed per comparison
    over all looks; `adjusted=False` is the naive rule (every look at 1 - alpha), kept only to
    show in benchmarks what the adjustment buys."""

    max_repeats: int = 10
    min_repeats: int = MIN_RUNS
    alpha: float = 0.05
    margin: float = MARGIN
    growth: float = 1.5
    adjusted: bool = True
    futility: bool = True
    resamples: int = RESAMPLES

    def __post_init__(self) -> None:
        if self.min_repeats < MIN_RUNS:
            raise ValueError(f"min_repeats must be at least {MIN_RUNS}: one run has no spread")
        if self.max_repeats < self.min_repeats:
            raise ValueError("max_repeats must be at least min_repeats")
        if not 0 < self.alpha < 1 or self.growth < 1:
            raise ValueError("alpha must be in (0, 1) and growth at least 1")

    def looks(self) -> tuple[int, ...]:
        """Runs a side at each scheduled look: min_repeats, then x growth (at least +1), up to
        and always including max_repeats."""
        out = [self.min_repeats]
        while out[-1] < self.max_repeats:
            out.append(min(self.max_repeats, max(out[-1] + 1, math.ceil(out[-1] * self.growth))))
        return tuple(out)

    def look_confidence(self) -> float:
        """The confidence of every scheduled look: 1 - alpha / L (1 - alpha when not adjusted);
        Holm then splits it over the metrics (`step_down`)."""
        return 1.0 - (self.alpha / len(self.looks()) if self.adjusted else self.alpha)

    def final_confidence(self, runs: int) -> float:
        """An unscheduled last look at `runs` a side gets the alpha of every look not yet taken."""
        if not self.adjusted:
            return 1.0 - self.alpha
        looks = self.looks()
        taken = sum(1 for n in looks if n < runs)
        return 1.0 - self.alpha * (len(looks) - taken) / len(looks)

    def look_alpha(self, runs: int) -> float:
        """The family-wise alpha the look at `runs` a side spends: alpha / L at a scheduled look,
        the alpha of every look not taken at an unscheduled last one."""
        if runs in self.looks():
            return 1.0 - self.look_confidence()
        return 1.0 - self.final_confidence(runs)


@dataclass(frozen=True)
class ValueStatus:
    """Where one value stands against the baseline."""

    label: str
    runs: int  # measured runs
    attempts: int  # runs tried, measured or not
    state: State
    verdicts: dict[str, VerdictName]  # per metric: at its deciding look, else the latest look
    decided_at: dict[str, int]  # per decided metric: runs a side at the look that decided it
    more: dict[str, MoreRuns | None]  # per undecided metric: the repeat estimate
    why: str = ""
    # per metric: the Change of the look that decided it (else the latest look), at the Holm
    # level it was judged at; the decision record (tuning.compare.decision) keeps these
    changes: dict[str, Change] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "changes"}
        out["more"] = {k: (v.to_json() if v else None) for k, v in self.more.items()}
        return out


@dataclass(frozen=True)
class Plan:
    """What to run next: `rounds` interleaved rounds of the baseline and each `pending` value
    (0 when `stop`), and why."""

    rounds: int
    pending: tuple[str, ...]
    stop: bool
    reason: str
    next_look: int | None  # runs a side at the next look
    next_confidence: float | None  # the confidence that look uses
    final_look: bool  # the next look is the last (the budget ends before the scheduled one)
    values: dict[str, ValueStatus] = field(default_factory=dict)
    design: Design = field(default_factory=Design)

    @property
    def runs(self) -> int:
        """Runs the next step adds: rounds x (baseline + pending values)."""
        return self.rounds * (1 + len(self.pending))

    def to_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "runs": self.runs,
            "pending": list(self.pending),
            "stop": self.stop,
            "reason": self.reason,
            "next_look": self.next_look,
            "next_confidence": self.next_confidence,
            "final_look": self.final_look,
            "looks": list(self.design.looks()),
            "look_confidence": self.design.look_confidence(),
            "design": asdict(self.design),
            "values": {k: v.to_json() for k, v in self.values.items()},
        }


def _finite(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _measured(rows: Sequence[Row], metrics: Sequence[str]) -> list[Row]:
    """The runs with a number for the first watched metric (the objective), in run order: a
    guard a run could not measure (TPOT of one-token outputs) does not unmake the run."""
    return [r for r in rows if _finite(r.get(metrics[0]))] if metrics else list(rows)


def _series(rows: Sequence[Row], key: str, n: int) -> list[float]:
    """The metric's values over the first n measured runs (those that have it)."""
    return [float(r[key]) for r in rows[:n] if _finite(r.get(key))]


def _measures(rows: Sequence[Row], key: str) -> bool:
    return any(_finite(r.get(key)) for r in rows)


@lru_cache(maxsize=8192)
def _change(
    base: tuple[float, ...],
    cand: tuple[float, ...],
    better: Direction,
    scale: MetricScale,
    confidence: float,
    resamples: int,
    margin: float,
) -> Change:
    """One look's verdict on one metric at one confidence; cached, since each call of the
    stateless plan_next judges every earlier look again, and Holm's steps ask again at looser
    levels (the same numbers give the same verdict: the bootstrap is seeded by them)."""
    return bootstrap_change(
        base,
        cand,
        better,
        confidence=confidence,
        resamples=resamples,
        margin=margin,
        estimate=False,
        metric_scale=scale,
    )


def _scale(key: str) -> MetricScale:
    metric = METRIC_BY_KEY.get(key)
    return metric.scale if metric else "ratio"


@dataclass(frozen=True)
class _Judged:
    """One value's metrics after every look it has reached."""

    verdicts: dict[str, VerdictName]
    decided_at: dict[str, int]
    changes: dict[str, Change]
    more: dict[str, MoreRuns | None]
    futile: bool


def _look_holm(
    base: Sequence[Row],
    cand: Sequence[Row],
    metrics: Mapping[str, Direction],
    design: Design,
    n: int,
    alpha: float,
) -> dict[str, Change]:
    """Holm over every watched metric at the look of `n` runs a side, at the look's alpha."""

    def judge(key: str, confidence: float) -> Change:
        return _change(
            tuple(_series(base, key, n)),
            tuple(_series(cand, key, n)),
            metrics[key],
            _scale(key),
            confidence,
            design.resamples,
            design.margin,
        )

    return step_down(list(metrics), alpha, judge)


def _judge(
    base: Sequence[Row],
    cand: Sequence[Row],
    metrics: Mapping[str, Direction],
    design: Design,
    final: bool,
) -> _Judged:
    """Every watched metric of one value at each scheduled look it has reached (and, if `final`,
    one last look at the runs it has), Holm over the metrics within each look's alpha: a metric
    keeps the verdict of the first look that decided it."""
    n_max = min(len(base), len(cand))
    looks = [n for n in design.looks() if n <= n_max]
    if final and n_max >= design.min_repeats and (not looks or looks[-1] < n_max):
        looks.append(n_max)
    verdicts: dict[str, VerdictName] = {}
    decided_at: dict[str, int] = {}
    changes: dict[str, Change] = {}
    for n in looks:
        judged = _look_holm(base, cand, metrics, design, n, design.look_alpha(n))
        for key, change in judged.items():
            if key in decided_at:
                continue
            verdicts[key], changes[key] = change.verdict, change
            if change.verdict in DECIDED:
                decided_at[key] = n
        if len(decided_at) == len(metrics):
            break
    more: dict[str, MoreRuns | None] = {}
    hopeless: dict[str, bool] = {}  # per undecided metric: futile on its own
    if looks:
        n = looks[-1]
        # The estimates aim at the next look's strictest Holm level (conservative).
        conf = 1.0 - design.look_alpha(n) / max(1, len(metrics))
        for key in metrics:
            if key in decided_at:
                continue
            b, c = _series(base, key, n), _series(cand, key, n)
            if not b or not c:  # not measured: nothing to estimate, never holds a value back
                continue
            scale = _scale(key)
            more[key] = more_runs(b, c, confidence=conf, margin=design.margin, metric_scale=scale)
            hopeless[key] = False
            if design.futility and n >= FUTILITY_MIN_RUNS:
                odds = more_runs(
                    b, c, confidence=conf, margin=design.margin, power=FUTILITY_POWER,
                    metric_scale=scale,
                )  # fmt: skip
                hopeless[key] = odds.runs is None or n + odds.runs > design.max_repeats
            if more[key] is not None and key in changes:
                changes[key] = replace(changes[key], more=more[key])
    # futile when every metric still undecided is: one that can still be decided keeps it going
    futile = bool(hopeless) and all(hopeless.values())
    return _Judged(verdicts, decided_at, changes, more, futile)


def plan_next(
    baseline: Sequence[Row],
    values: Mapping[str, Sequence[Row]],
    metrics: Mapping[str, Direction] | Sequence[str] = DEFAULT_METRICS,
    design: Design | None = None,
    *,
    seconds_per_run: float | None = None,
    budget_left_s: float | None = None,
) -> Plan:
    """The next step of a repeat-until-decided experiment.

    `baseline` and each of `values` (label -> runs) are the runs so far in run order, each a
    mapping of metric key -> value (a run row of the store works; a failed run has None).
    `metrics` are the metrics that must be decided (keys, or key -> which way is better).
    `seconds_per_run` (the mean wall time of one run, restart included) and `budget_left_s`
    limit the next step to what the time left affords; leave them None for no time limit.
    """
    design = design or Design()
    watched: dict[str, Direction] = (
        dict(metrics)
        if isinstance(metrics, Mapping)
        else {k: METRIC_BY_KEY[k].better for k in metrics}
    )
    keys = list(watched)
    base = _measured(baseline, keys)
    looks = design.looks()

    def affordable_rounds(pending: int) -> int | None:
        if seconds_per_run is None or budget_left_s is None:
            return None
        return max(0, int(budget_left_s // (max(seconds_per_run, 1e-9) * (1 + pending))))

    def status(label: str, rows: Sequence[Row], final: bool) -> ValueStatus:
        cand = _measured(rows, keys)
        n, tried = len(cand), len(rows)
        if n == 0 and tried >= 2:
            return ValueStatus(label, 0, tried, "failed", {}, {}, {}, "no measured run in 2 tries")
        # Out of attempts between two scheduled looks: one last look at what it has.
        final = final or tried >= design.max_repeats
        judged = _judge(base, cand, watched, design, final)
        verdicts, decided_at, more = judged.verdicts, judged.decided_at, judged.more

        def value_status(state: State, why: str) -> ValueStatus:
            return ValueStatus(
                label, n, tried, state, verdicts, decided_at, more, why, judged.changes
            )

        # a watched metric no run of either side measured cannot be decided: it does not hold
        # the value back (the record shows it undecided, "no measured run")
        needed = [k for k in keys if _measures(base, k) and _measures(cand, k)]
        if needed and all(k in decided_at for k in needed):
            why = ", ".join(f"{k} {verdicts[k]} at {decided_at[k]} runs" for k in needed)
            return value_status("decided", why)
        state: State = "pending"
        why = ""
        if judged.futile:
            state, why = "futile", f"the repeat estimate exceeds max_repeats {design.max_repeats}"
        elif tried >= design.max_repeats:
            state, why = "capped", f"max_repeats {design.max_repeats} reached"
        elif final:
            state, why = "budget", "the time budget is spent"
        return value_status(state, why)

    def stopped(reason: str, final: bool) -> Plan:
        statuses = {label: status(label, rows, final) for label, rows in values.items()}
        return Plan(0, (), True, reason, None, None, False, statuses, design)

    if not values:
        return stopped("no value to compare", False)
    if not base and len(baseline) >= 2:
        return stopped("the baseline gave no measured run in 2 tries", False)
    statuses = {label: status(label, rows, False) for label, rows in values.items()}
    pending = tuple(label for label, s in statuses.items() if s.state == "pending")
    if not pending:
        done: set[str] = {s.state for s in statuses.values()}
        return Plan(0, (), True, _end_reason(done), None, None, False, statuses, design)
    current = min(statuses[label].runs for label in pending)
    attempts = max(statuses[label].attempts for label in pending)
    target = next((n for n in looks if n > current), looks[-1])
    rounds = max(target - current, target - len(base), 1)
    rounds = min(rounds, design.max_repeats - attempts)
    afford = affordable_rounds(len(pending))
    final = False
    if afford is not None and afford < rounds:
        if afford == 0:
            return stopped("the time budget is spent", True)
        rounds, final = afford, True
        target = current + afford
    confidence = (
        design.final_confidence(target)
        if final or target not in looks
        else design.look_confidence()
    )
    reason = f"{len(pending)} value(s) undecided: {rounds} more round(s) to the look at {target}"
    return Plan(rounds, pending, False, reason, target, confidence, final, statuses, design)


def _end_reason(states: set[str]) -> str:
    if states == {"decided"}:
        return "every value is decided"
    parts = {
        "decided": "decided",
        "futile": "cannot be decided within max_repeats",
        "capped": "max_repeats reached",
        "failed": "no measurement",
    }
    return "stopped: " + ", ".join(parts.get(s, s) for s in sorted(states))
