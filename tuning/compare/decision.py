"""The decision record: what an experiment decided, made once by the rule that stopped it, over the
metrics it declared primary (tuning.compare.primaries), and stored (`experiments.decision_json`,
m017), so that every surface reads the same record rather than judging the runs again another way.

Three rules, named in the record:
- **fixed-n** (fixed repeats): one look when the runs are in, every candidate against the
  baseline at family-wise alpha over the primaries (Holm, tuning.compare.holm);
- **sequential** (repeat until decided, tuning.compare.sequential): the looks it took, each
  spending alpha / L split over the primaries by Holm; a metric's verdict is the one of the look
  that decided it, and the record keeps that look and the alpha each look spent;
- **ad-hoc**: runs a user put together (several experiments, a hand-picked selection): no
  stopping rule, each metric at a plain 95 %, uncorrected; shown for what it is, never a
  decision and never a recommendation.

A value is recommended only when its objective is decided better and no guard is decided worse;
the record says, for an undecided one, how many more runs a side would likely decide it (its
objective's repeat estimate) and, once the experiment layer has priced it, what that costs
(`NextStep`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparability import norm_value
from tuning.compare.comparison import Comparison, Side
from tuning.compare.holm import holm
from tuning.compare.primaries import Primaries
from tuning.compare.sequential import Plan
from tuning.compare.stats import DECIDED, MARGIN, Change, MoreRuns, Values

Rule = Literal["fixed-n", "sequential", "ad-hoc"]
Outcome = Literal["recommended", "trade-off", "not better", "undecided", "not applied"]
ALPHA = 0.05  # the family-wise false-alarm rate a decision holds (1 - stats.CONFIDENCE)
RULES: tuple[Rule, ...] = ("fixed-n", "sequential", "ad-hoc")
_CHANGE_FIELDS = {f.name for f in fields(Change)}


def change_to_json(change: Change) -> dict[str, Any]:
    out = asdict(change)
    out["more"] = asdict(change.more) if change.more else None
    return out


def change_from_json(data: Mapping[str, Any]) -> Change:
    """A Change as `change_to_json` wrote it (ValueError: not one)."""
    try:
        kept = {k: v for k, v in data.items() if k in _CHANGE_FIELDS}
        more = kept.get("more")
        kept["more"] = MoreRuns(**more) if isinstance(more, Mapping) else None
        return Change(**kept)
    except TypeError as exc:
        raise ValueError(f"not a stored change: {exc}") from None


@dataclass(frozen=True)
class MetricDecision:
    """One primary metric of one value: the verdict, its interval at the level it was judged at
    (Change.confidence), and the look (runs a side) that decided it."""

    key: str
    role: str  # 'objective' or 'guard'
    change: Change
    look: int | None = None

    @property
    def verdict(self) -> str:
        return self.change.verdict

    def to_json(self) -> dict[str, Any]:
        c = self.change

        def pct(x: float | None) -> float | None:
            return None if x is None else x * 100

        return {
            "metric": self.key,
            "role": self.role,
            "verdict": c.verdict,
            "confidence": c.confidence,
            "decided_at_look": self.look,
            "runs_a_side": [c.n_base, c.n_cand],
            "change_pct": pct(c.rel_change),
            "ci_low_pct": pct(c.rel_low),
            "ci_high_pct": pct(c.rel_high),
            "change_diff": c.diff,
            "more_runs_per_side": c.more.to_json()["runs"] if c.more else None,
            "change": change_to_json(c),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricDecision:
        look = data.get("decided_at_look")
        return cls(
            str(data["metric"]),
            str(data.get("role") or "guard"),
            change_from_json(data["change"]),
            int(look) if look is not None else None,
        )


@dataclass(frozen=True)
class ValueDecision:
    """One candidate value against the baseline, on every primary metric (objective first)."""

    value: str | None
    metrics: tuple[MetricDecision, ...]
    state: str = "done"  # the rule's state (sequential: decided, budget, capped, futile, ...)
    why: str = ""
    not_applied: bool = False

    @property
    def objective(self) -> MetricDecision | None:
        return next((m for m in self.metrics if m.role == "objective"), None)

    @property
    def guards_worse(self) -> tuple[str, ...]:
        return tuple(m.key for m in self.metrics if m.role == "guard" and m.verdict == "worse")

    @property
    def outcome(self) -> Outcome:
        """recommended (objective better, no guard worse), trade-off (objective better, a guard
        worse), not better (objective decided equivalent or worse), undecided, not applied."""
        objective = self.objective
        if self.not_applied or objective is None or objective.verdict == "not applied":
            return "not applied"
        if objective.verdict == "better":
            return "trade-off" if self.guards_worse else "recommended"
        return "not better" if objective.verdict in DECIDED else "undecided"

    @property
    def more(self) -> MoreRuns | None:
        """What would decide an undecided objective: its repeat estimate."""
        objective = self.objective
        if self.outcome != "undecided" or objective is None:
            return None
        return objective.change.more

    @property
    def gain(self) -> float:
        """The objective's change in its better direction (to rank recommended values)."""
        objective = self.objective
        if objective is None:
            return 0.0
        c = objective.change
        move = c.rel_change if c.rel_change is not None else (c.diff or 0.0)
        return move if METRIC_BY_KEY[objective.key].better == "higher" else -move

    def metric(self, key: str) -> MetricDecision | None:
        return next((m for m in self.metrics if m.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "outcome": self.outcome,
            "state": self.state,
            "why": self.why,
            "not_applied": self.not_applied,
            "metrics": [m.to_json() for m in self.metrics],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ValueDecision:
        value = data.get("value")
        return cls(
            None if value is None else str(value),
            tuple(MetricDecision.from_json(m) for m in data.get("metrics") or []),
            str(data.get("state") or "done"),
            str(data.get("why") or ""),
            bool(data.get("not_applied")),
        )


@dataclass(frozen=True)
class NextStep:
    """What would likely decide an undecided experiment, priced by the experiment layer: more
    runs a side, their time, and the limits to resume it with (`experiment --resume`)."""

    runs_a_side: int | None  # None: more than the estimate's cap ("many")
    seconds: float | None = None
    about: str | None = None  # the seconds in words ('about 6 min'), from the estimate
    max_repeats: int | None = None
    budget_minutes: float | None = None

    def text(self) -> str:
        """'3 more runs a side, about 6 min'."""
        if self.runs_a_side is None:
            return "many more runs a side (over the estimate's cap)"
        runs = f"{self.runs_a_side} more run{'s' if self.runs_a_side != 1 else ''} a side"
        return runs + (f", {self.about}" if self.about else "")

    def command(self, experiment_id: int | None, db: str | None = None) -> str | None:
        """`tuning-lab experiment --resume ID --max-repeats N [--budget-minutes M]`."""
        if experiment_id is None or self.max_repeats is None:
            return None
        words = ["tuning-lab experiment"]
        if db:
            words.append(f"--db {db}")
        words.append(f"--resume {experiment_id} --max-repeats {self.max_repeats}")
        if self.budget_minutes is not None:
            words.append(f"--budget-minutes {math.ceil(self.budget_minutes):d}")
        return " ".join(words)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> NextStep | None:
        if not isinstance(data, Mapping):
            return None
        return cls(
            runs_a_side=data.get("runs_a_side"),
            seconds=data.get("seconds"),
            about=data.get("about"),
            max_repeats=data.get("max_repeats"),
            budget_minutes=data.get("budget_minutes"),
        )


@dataclass(frozen=True)
class Decision:
    """An experiment's decision (or an ad-hoc look), as stored and as every surface reads it."""

    rule: Rule
    primaries: Primaries
    alpha: float
    margin: float
    param: str | None
    baseline: str | None  # the baseline's value
    values: tuple[ValueDecision, ...]
    looks: tuple[int, ...] = ()  # runs a side at each scheduled look (fixed-n: the one look)
    look_alpha: float | None = None  # the family-wise alpha each scheduled look spends
    reason: str = ""  # how the rule stopped, or why a comparison is ad hoc
    complete: bool = True  # False while the experiment still runs (the record may change)
    experiment_id: int | None = None
    next_step: NextStep | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def decides(self) -> bool:
        """A decision proper: made by an experiment's rule, not an ad-hoc look."""
        return self.rule != "ad-hoc"

    @property
    def recommended(self) -> ValueDecision | None:
        """The value to set: objective decided better, no guard decided worse (the largest
        objective gain among those); never from an ad-hoc look or an unfinished experiment."""
        if not self.decides or not self.complete:
            return None
        winners = [v for v in self.values if v.outcome == "recommended"]
        return max(winners, key=lambda v: v.gain) if winners else None

    @property
    def undecided(self) -> tuple[ValueDecision, ...]:
        return tuple(v for v in self.values if v.outcome == "undecided")

    def value(self, value: Any) -> ValueDecision | None:
        """The record of one candidate value (compared as a user would: 16 == '16')."""
        want = norm_value(value)
        return next((v for v in self.values if norm_value(v.value) == want), None)

    def to_json(self) -> dict[str, Any]:
        rec = self.recommended
        return {
            "rule": self.rule,
            "decides": self.decides,
            "primaries": self.primaries.to_json(),
            "alpha": self.alpha,
            "margin": self.margin,
            "param": self.param,
            "baseline": self.baseline,
            "looks": list(self.looks),
            "look_alpha": self.look_alpha,
            "reason": self.reason,
            "complete": self.complete,
            "experiment_id": self.experiment_id,
            "recommended": rec.value if rec else None,
            "next_step": self.next_step.to_json() if self.next_step else None,
            "notes": list(self.notes),
            "values": [v.to_json() for v in self.values],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        """A stored record (ValueError: not one this lab can read)."""
        try:
            rule = data["rule"]
            if rule not in RULES:
                raise ValueError(f"unknown rule {rule!r}")
            look_alpha = data.get("look_alpha")
            return cls(
                rule=rule,
                primaries=Primaries.of(data.get("primaries")),
                alpha=float(data["alpha"]),
                margin=float(data["margin"]),
                param=data.get("param"),
                baseline=data.get("baseline"),
                values=tuple(ValueDecision.from_json(v) for v in data.get("values") or []),
                looks=tuple(int(n) for n in data.get("looks") or []),
                look_alpha=None if look_alpha is None else float(look_alpha),
                reason=str(data.get("reason") or ""),
                complete=bool(data.get("complete", True)),
                experiment_id=data.get("experiment_id"),
                next_step=NextStep.from_json(data.get("next_step")),
                notes=tuple(str(n) for n in data.get("notes") or []),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a stored decision: {exc}") from None


def _roles(primaries: Primaries) -> dict[str, str]:
    return {k: primaries.role(k) for k in primaries.keys}


def _unapplied(comparison: Comparison, side: Side, primaries: Primaries) -> ValueDecision:
    changes = [
        (k, comparison.changes.get((side.label, k))) for k in primaries.keys
    ]  # the comparison's "not applied" Changes
    metrics = tuple(MetricDecision(k, primaries.role(k), c) for k, c in changes if c is not None)
    return ValueDecision(side.value, metrics, "not applied", "not applied by the engine", True)


def decide_fixed(
    comparison: Comparison,
    primaries: Primaries,
    alpha: float = ALPHA,
    *,
    experiment_id: int | None = None,
    complete: bool = True,
) -> Decision:
    """The fixed-n test: every candidate side against the baseline once, Holm over the
    primaries at family-wise `alpha` (a metric no run measured stays undecided)."""
    base = comparison.baseline
    values = []
    n_looks: set[int] = set()
    for side in comparison.candidates:
        if base.not_applied or side.not_applied:
            values.append(_unapplied(comparison, side, primaries))
            continue
        judged = holm(base.values, side.values, primaries.keys, alpha, margin=comparison.margin)
        n = min(len(base.measured_ids), len(side.measured_ids))
        n_looks.add(n)
        metrics = tuple(
            MetricDecision(k, primaries.role(k), c, n if c.verdict in DECIDED else None)
            for k, c in judged.items()
        )
        values.append(ValueDecision(side.value, metrics))
    return Decision(
        rule="fixed-n",
        primaries=primaries,
        alpha=alpha,
        margin=comparison.margin,
        param=comparison.param,
        baseline=base.value,
        values=tuple(values),
        looks=tuple(sorted(n_looks)),
        look_alpha=alpha,
        reason="fixed repeats: one look once every run is in",
        complete=complete,
        experiment_id=experiment_id,
    )


def decide_sequential(
    plan: Plan,
    primaries: Primaries,
    candidates: Sequence[str],
    *,
    param: str | None,
    baseline: str | None,
    experiment_id: int | None = None,
    complete: bool = True,
) -> Decision:
    """The repeat-until-decided rule's outcome: each value as the plan's looks left it (a value
    the plan does not judge, its engine not having applied it, is recorded as not applied)."""
    design = plan.design
    values = []
    for label in candidates:
        status = plan.values.get(label)
        if status is None:
            why = "not applied by the engine"
            values.append(ValueDecision(label, (), "not applied", why, True))
            continue
        metrics = tuple(
            MetricDecision(k, primaries.role(k), status.changes[k], status.decided_at.get(k))
            for k in primaries.keys
            if k in status.changes
        )
        values.append(ValueDecision(label, metrics, status.state, status.why))
    return Decision(
        rule="sequential",
        primaries=primaries,
        alpha=design.alpha,
        margin=design.margin,
        param=param,
        baseline=baseline,
        values=tuple(values),
        looks=design.looks(),
        look_alpha=design.look_alpha(design.looks()[0]),
        reason=plan.reason,
        complete=complete,
        experiment_id=experiment_id,
    )


def decide_pair(
    base: Mapping[str, Values],
    cand: Mapping[str, Values],
    primaries: Primaries,
    *,
    baseline: str,
    candidate: str,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    complete: bool = True,
) -> Decision:
    """The fixed-n test between two sets of runs given as per-run values (metric -> one number
    per run), for runs that no one-parameter comparison groups (a tuning plan's start against
    its recommended configuration, which differ in several parameters)."""
    judged = holm(base, cand, primaries.keys, alpha, margin=margin)
    n = min(len(base.get(primaries.objective, ())), len(cand.get(primaries.objective, ())))
    metrics = tuple(
        MetricDecision(k, primaries.role(k), c, n if c.verdict in DECIDED else None)
        for k, c in judged.items()
    )
    return Decision(
        rule="fixed-n",
        primaries=primaries,
        alpha=alpha,
        margin=margin,
        param=None,
        baseline=baseline,
        values=(ValueDecision(candidate, metrics),),
        looks=(n,),
        look_alpha=alpha,
        reason="fixed repeats: one look once every run is in",
        complete=complete,
    )


def decide_adhoc(comparison: Comparison, primaries: Primaries, why: str) -> Decision:
    """An ad-hoc look: the comparison's own verdicts (a plain 95 % each, no stopping rule, no
    correction) on the primaries, said to be what they are; never a recommendation."""
    values = []
    for side in comparison.candidates:
        metrics = tuple(
            MetricDecision(k, primaries.role(k), c)
            for k in primaries.keys
            if (c := comparison.changes.get((side.label, k))) is not None
        )
        values.append(ValueDecision(side.value, metrics, "ad hoc", why, bool(side.not_applied)))
    return Decision(
        rule="ad-hoc",
        primaries=primaries,
        alpha=1.0 - comparison.confidence,
        margin=comparison.margin,
        param=comparison.param,
        baseline=comparison.baseline.value,
        values=tuple(values),
        reason=why,
    )


def apply_decision(comparison: Comparison, decision: Decision) -> None:
    """Show the record on the comparison: each primary metric of each candidate side carries the
    decision's verdict and interval (so the table, the summaries and the exports read the
    record, not a fresh 95 % test); `roles` marks the primaries, and every other metric reads
    "for information, not corrected"."""
    comparison.roles = _roles(decision.primaries)
    shown = {m.key for m in comparison.metrics}
    for side in comparison.candidates:
        found = decision.value(side.value)
        if found is None:
            continue
        for metric in found.metrics:
            if metric.key in shown:
                comparison.changes[(side.label, metric.key)] = metric.change


def with_next_step(decision: Decision, step: NextStep | None) -> Decision:
    return replace(decision, next_step=step)
