"""Prefer vLLM's default when it does not matter: each tried value judged against the default on
the watched metrics, and the recommendation that follows (vLLM recipes keep "fewer explicit
overrides" when results are within 1 %; sweepeval calls a knob inert by an equivalence test).

A value is **equivalent** to the default when every watched metric's interval of the change lies
within the comparison's equivalence margin (stats: ±log(1 + E) on the log scale, E = 2 % unless
`--margin` says otherwise). It is **better beyond the margin** on a metric when the whole
interval lies past the margin in the metric's better direction: a gain the noise and the margin
cannot explain. The recommendation:
- a value better beyond the margin on some watched metric and worse on none: that value (the
  one better on the most metrics, then by the first metric's gain);
- otherwise vLLM's default, saying whether every value was equivalent (the knob is inert), some
  were undecided (more runs could change it) or a gain came with a loss (a trade-off);
- no default among the runs (or none known): no preference, and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import Comparison, Side
from tuning.compare.defaults import EngineDefault
from tuning.compare.present import margin_text, pct_text
from tuning.compare.stats import Change, bootstrap_change
from tuning.engine.effective import same
from tuning.engine.params import ParamError, format_value, get_param

# What must not move for the default to win: the lab's decided metrics (sequential's
# DEFAULT_METRICS) and the KV capacity, the memory wall's own number (a flag that buys KV room
# at equal speed is not inert). A metric no run measured is left out.
WATCHED: tuple[str, ...] = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "kv_cache_tokens")
State = Literal["default", "equivalent", "better", "trade-off", "not better", "not applied"]
Kind = Literal["default", "value", "none"]


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

    @property
    def inert(self) -> bool:
        """Every tried value was equivalent to the default on every watched metric."""
        judged = [v for v in self.values if v.state != "default"]
        return bool(judged) and all(v.state == "equivalent" for v in judged)

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "default": self.default.to_json() if self.default else None,
            "recommendation": self.kind,
            "recommended_value": self.recommended,
            "text": self.text,
            "equivalence_margin": self.margin,
            "watched_metrics": list(self.metrics),
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


def _gain(judged: ValueJudgement, key: str) -> float:
    change = judged.changes.get(key)
    if change is None or change.rel_change is None:
        return 0.0
    return change.rel_change if METRIC_BY_KEY[key].better == "higher" else -change.rel_change


def _labels(keys: Sequence[str]) -> str:
    return ", ".join(METRIC_BY_KEY[k].label for k in keys)


def prefer_default(
    comparison: Comparison, default: EngineDefault, metrics: Sequence[str] = WATCHED
) -> Preference:
    """The recommendation for the comparison's parameter (see the module docstring)."""
    keys = watched(comparison, metrics)
    name, margin = comparison.param, comparison.margin
    band = margin_text(margin)

    def pref(kind: Kind, text: str, rec: str | None = None, values: Any = ()) -> Preference:
        return Preference(name, default, kind, rec, text, margin, keys, list(values))

    if name is None:
        return pref("none", "Cannot prefer vLLM's default: these runs vary no single parameter.")
    if not default.known:
        return pref("none", f"Cannot prefer vLLM's default: {default.source}.")
    ref = default_side(comparison, default)
    shown = f"{name} = {default.text}"
    if ref is None:
        tried = ", ".join(str(s.value) for s in comparison.sides)
        return pref(
            "none",
            f"Cannot prefer vLLM's default: no run at its default {shown} among the values "
            f"tried ({tried}); add it to the values so the lab can keep the default when no "
            "value beats it.",
        )
    if len(ref.measured_ids) < 2:
        return pref(
            "none",
            f"Cannot prefer vLLM's default {shown}: {len(ref.measured_ids)} of its "
            f"{len(ref.run_ids)} runs measured, and a verdict needs 2.",
        )
    judged = judge(comparison, ref, keys)
    others = [j for j in judged if j.state != "default"]
    if not others:
        return pref(
            "default", f"Only vLLM's default {shown} ran: no other value to weigh.", ref.value
        )
    winners = [j for j in others if j.state == "better"]
    if winners:
        best = max(winners, key=lambda j: (len(j.beyond), _gain(j, keys[0]) if keys else 0.0))
        gains = ", ".join(
            f"{METRIC_BY_KEY[k].label} {pct_text(best.changes[k].rel_change)}" for k in best.beyond
        )
        return pref(
            "value",
            f"Set {name} = {best.value}: better than vLLM's default {default.text} beyond "
            f"{band} on {gains}, and worse on no watched metric.",
            best.value,
            judged,
        )
    keep = f"Keep vLLM's default {shown}"
    if all(j.state == "equivalent" for j in others):
        why = (
            f"no value of {name} changed any watched metric ({_labels(keys)}) by more than "
            f"{margin * 100:g} %; fewer flags."
        )
    else:
        counts: dict[str, int] = {}
        for j in others:
            counts[j.state] = counts.get(j.state, 0) + 1
        detail = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        why = (
            f"no value was shown better beyond {band} on a watched metric without being worse "
            f"on another ({detail}); fewer flags."
        )
        if counts.get("not better"):
            why += " More runs could still show a gain."
    return pref("default", f"{keep}: {why}", ref.value, judged)
