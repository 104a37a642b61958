"""The recommendation, read from the decision record (tuning.compare.decision), and vLLM's default
where it matters (vLLM recipes keep "fewer explicit overrides" when results are within 1 %;
sweepeval calls a knob inert by an equivalence test).

Nothing is recommended that is not decided: a value is recommended only when the experiment's own
rule decided its objective better and no guard worse (`Decision.recommended`). Otherwise:
- every value's objective decided not better (equivalent or worse): keep the baseline, and say
  "keep vLLM's default" when the baseline is vLLM's default (fewer flags);
- a value better on the objective but worse on a guard: a trade-off, named, not recommended;
- an objective still undecided: no recommendation, and what would decide it;
- an ad-hoc look (runs a user put together, no stopping rule): never a recommendation.

`judge` (each value against the default side on WATCHED, at the comparison's level) serves the
inert-knob finder (tuning.compare.inert), which is a separate, descriptive look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import Comparison, Side
from tuning.compare.decision import Decision, ValueDecision
from tuning.compare.defaults import EngineDefault
from tuning.compare.present import change_text
from tuning.compare.stats import Change, bootstrap_change
from tuning.engine.effective import same
from tuning.engine.params import ParamError, format_value, get_param, show_value

# What must not move for the default to win: the lab's decided metrics (sequential's
# DEFAULT_METRICS) and the KV capacity, the memory wall's own number (a flag that buys KV room
# at equal speed is not inert). A metric no run measured is left out.
WATCHED: tuple[str, ...] = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "kv_cache_tokens")
State = Literal["default", "equivalent", "better", "trade-off", "not better", "not applied"]
# default: keep vLLM's default; keep: keep the baseline (not vLLM's default); value: set
# `recommended`; none: no recommendation (undecided, a trade-off, an ad-hoc look)
Kind = Literal["default", "keep", "value", "none"]


@dataclass(frozen=True)
class ValueJudgement:
    """One tried value against the reference (the default): per watched metric, its change."""

    value: str | None
    state: State
    changes: dict[str, Change] = field(default_factory=dict)
    beyond: tuple[str, ...] = ()  # metrics better beyond the margin
    worse: tuple[str, ...] = ()  # metrics decided worse

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "state": self.state,
            "better_beyond_margin": list(self.beyond),
            "worse": list(self.worse),
            "metrics": {
                k: {
                    "verdict": c.verdict,
                    "change_pct": None if c.rel_change is None else c.rel_change * 100,
                    "ci_low_pct": None if c.rel_low is None else c.rel_low * 100,
                    "ci_high_pct": None if c.rel_high is None else c.rel_high * 100,
                }
                for k, c in self.changes.items()
            },
        }


@dataclass(frozen=True)
class Preference:
    """The recommendation for one parameter's values, and what it rests on."""

    param: str | None
    default: EngineDefault | None
    kind: Kind  # default: keep vLLM's default; value: set `recommended`; none: no preference
    recommended: str | None
    text: str
    margin: float
    metrics: tuple[str, ...]
    values: list[ValueJudgement] = field(default_factory=list)

    inert: bool = False  # every value decided equivalent on every primary metric

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "default": self.default.to_json() if self.default else None,
            "recommendation": self.kind,
            "recommended_value": self.recommended,
            "text": self.text,
            "equivalence_margin": self.margin,
            "primary_metrics": list(self.metrics),
            "inert": self.inert,
            "values": [v.to_json() for v in self.values],
        }


def watched(comparison: Comparison, metrics: Sequence[str] = WATCHED) -> tuple[str, ...]:
    """The watched metrics some run of the comparison measured."""
    return tuple(k for k in metrics if any(s.values.get(k) for s in comparison.sides))


def _beyond(change: Change, better: str) -> bool:
    """The whole interval lies past the margin in the better direction."""
    if change.scale == "log" and change.log_low is not None and change.log_high is not None:
        lo, hi, band = change.log_low, change.log_high, math.log1p(change.margin)
    elif change.diff_low is not None and change.diff_high is not None and change.base_mean:
        lo, hi, band = change.diff_low, change.diff_high, change.margin * abs(change.base_mean)
    else:
        return False
    return lo > band if better == "higher" else hi < -band


def _change(comparison: Comparison, ref: Side, side: Side, key: str) -> Change:
    """`side` vs `ref` on one metric: the comparison's own verdict when `ref` is its baseline,
    else the same rule (confidence, margin) with the default as the reference."""
    if ref is comparison.baseline and (found := comparison.changes.get((side.label, key))):
        return found
    return bootstrap_change(
        ref.values.get(key) or [],
        side.values.get(key) or [],
        METRIC_BY_KEY[key].better,
        confidence=comparison.confidence,
        margin=comparison.margin,
        metric_scale=METRIC_BY_KEY[key].scale,
    )


def judge(comparison: Comparison, ref: Side, metrics: Sequence[str]) -> list[ValueJudgement]:
    """Every side but `ref`, judged against it on `metrics`."""
    out = []
    for side in comparison.sides:
        if side is ref:
            out.append(ValueJudgement(side.value, "default"))
            continue
        changes = {k: _change(comparison, ref, side, k) for k in metrics}
        beyond = tuple(k for k, c in changes.items() if _beyond(c, METRIC_BY_KEY[k].better))
        worse = tuple(k for k, c in changes.items() if c.verdict == "worse")
        state: State = "not better"
        if ref.not_applied or side.not_applied:
            state = "not applied"
        elif changes and all(c.verdict == "equivalent" for c in changes.values()):
            state = "equivalent"
        elif beyond:
            state = "trade-off" if worse else "better"
        out.append(ValueJudgement(side.value, state, changes, beyond, worse))
    return out


def default_side(comparison: Comparison, default: EngineDefault) -> Side | None:
    """The side that ran vLLM's default value, if any."""
    if not default.known or comparison.param is None:
        return None
    try:
        param = get_param(comparison.param)
    except ParamError:  # a learned flag: compare the values as text
        return next((s for s in comparison.sides if s.value == format_value(default.value)), None)
    for side in comparison.sides:
        if side.value is not None and same(param, side.value, default.value):
            return side
    return None


def _is(param: str | None, value: Any, default: EngineDefault) -> bool:
    """`value` is vLLM's default for `param`."""
    if not default.known or param is None or value is None:
        return False
    try:
        return same(get_param(param), value, default.value)
    except ParamError:  # a learned flag: compare the values as text
        return format_value(value) == format_value(default.value)


def _metric_words(value: ValueDecision, key: str) -> str:
    """'output throughput +12.0 % (better)'."""
    found = value.metric(key)
    metric = METRIC_BY_KEY[key]
    if found is None or not (found.change.n_base and found.change.n_cand):
        return f"{metric.label} not measured"
    return f"{metric.label} {change_text(found.change, metric.unit)} ({found.verdict})"


def _rule_words(decision: Decision) -> str:
    if decision.rule == "sequential":
        return "the experiment's repeat-until-decided rule"
    return "the experiment's fixed-repeats test"


def prefer_default(
    comparison: Comparison, default: EngineDefault, decision: Decision
) -> Preference:
    """The recommendation for the comparison's parameter, from the decision record (see the
    module docstring); `default` says whether the value kept is vLLM's own."""
    keys = decision.primaries.keys
    name, margin = comparison.param, comparison.margin
    objective = METRIC_BY_KEY[decision.primaries.objective].label

    def pref(kind: Kind, text: str, rec: str | None = None, inert: bool = False) -> Preference:
        return Preference(name, default, kind, rec, text, margin, keys, [], inert)

    def shown(value: Any) -> str:
        return f"{name} = {show_value(name, value)}"

    if not decision.decides:
        return pref(
            "none",
            f"No recommendation: an ad-hoc look ({decision.reason}), its verdicts uncorrected; "
            "a decision comes from an experiment's own rule (compare --experiment ID).",
        )
    if not decision.complete:
        return pref(
            "none",
            "No recommendation yet: the experiment's rule has not stopped (it is still running, "
            f"or was stopped first: {decision.reason}).",
        )
    if name is None:
        return pref("none", "No recommendation: these runs vary no single parameter.")
    if not decision.values:
        return pref("none", "No recommendation: no candidate value to weigh.")
    rec = decision.recommended
    if rec is not None:
        guards = [_metric_words(rec, g) for g in decision.primaries.guards]
        why = (
            f"{_metric_words(rec, decision.primaries.objective)}, no guard worse"
            + (f" ({', '.join(guards)})" if guards else "")
            + f", decided by {_rule_words(decision)}"
        )
        if _is(name, rec.value, default):
            return pref("value", f"Set vLLM's default {shown(rec.value)}: {why}.", rec.value)
        return pref("value", f"Set {shown(rec.value)}: {why}.", rec.value)
    outcomes = [v.outcome for v in decision.values]
    metrics = [m for v in decision.values for m in v.metrics]
    measured = [m for m in metrics if m.change.n_base and m.change.n_cand]
    inert = bool(measured) and all(m.verdict == "equivalent" for m in measured)
    if all(o == "not better" for o in outcomes):
        why = f"no value's {objective} is decided better than the baseline's"
        if _is(name, decision.baseline, default):
            detail = "every value equivalent on every primary metric" if inert else why
            return pref(
                "default",
                f"Keep vLLM's default {name} = {default.text}: {detail}; fewer flags.",
                decision.baseline,
                inert,
            )
        note = ""
        if default.known:
            note = f" (vLLM's default, {name} = {default.text}, was not among the values tried)"
        text = f"Keep the baseline {shown(decision.baseline)}: {why}{note}."
        return pref("keep", text, None, inert)
    parts = []
    for value in decision.values:
        if value.outcome == "trade-off":
            worse = ", ".join(METRIC_BY_KEY[k].label for k in value.guards_worse)
            parts.append(
                f"{shown(value.value)} is better on {objective} but worse on {worse}: a "
                "trade-off, not a recommendation"
            )
    undecided = [v for v in decision.values if v.outcome == "undecided"]
    if undecided:
        values = ", ".join(show_value(name, v.value) for v in undecided)
        step = decision.next_step
        how = f": {step.text()} would likely decide it" if step else ""
        parts.append(f"{objective} undecided for {name} = {values}{how}")
    if not parts:
        parts.append(f"no value's {objective} is decided better without a guard decided worse")
    return pref("none", "No recommendation: " + "; ".join(parts) + ".")
