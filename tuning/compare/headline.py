"""The decision at a glance: what the Compare page, the HTML report and `compare` (CLI) open with,
read from the decision record (tuning.compare.decision), so a reader sees what was decided, and
by which rule, before any table.

One sentence per candidate over the experiment's primary metrics only (its objective, then its
guards), each with its change and verdict; every other metric is counted as "for information,
not corrected" and never named here. Then the rule that made the decision, and either the
recommendation (tuning.compare.prefer: only when the objective is decided better and no guard
worse) or what would decide it:

    stream-interval 16 vs 1: objective output throughput +97.7 % (undecided); guards p99 TTFT
    +3.1 % (equivalent), p99 TPOT -40.2 % (better); 19 other metrics for information, not
    corrected
    Judged by repeat until decided: ... Holm over the objective and 2 guards ...
    Not decided: 3 more runs a side, about 6 min, would likely decide it: tuning-lab ...

An ad-hoc look (runs a user put together) says so in every sentence and never recommends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.compare.catalog import METRIC_BY_KEY, Metric
from tuning.compare.comparison import Comparison, Side
from tuning.compare.decision import Decision, ValueDecision
from tuning.compare.prefer import Preference
from tuning.compare.present import INFORMATION, change_text, level_text
from tuning.compare.stats import Change
from tuning.engine.params import show_value

ADHOC = "ad-hoc look, uncorrected"


@dataclass(frozen=True)
class Decided:
    """One primary metric of a candidate: its role, change and verdict."""

    metric: Metric
    change: Change
    role: str

    @property
    def text(self) -> str:
        """'output throughput +97.7 % (undecided)'; a difference-scale metric in its unit."""
        moved = change_text(self.change, self.metric.unit)
        return f"{self.metric.label} {moved} ({self.change.verdict})"


@dataclass(frozen=True)
class CandidateHeadline:
    """What one candidate's sentence says, kept as data for the JSON and the page."""

    side: str  # the candidate's label
    baseline: str  # the baseline's label
    title: str  # 'param X vs Y' or 'label vs label'
    primaries: tuple[Decided, ...]  # the objective, then the guards
    information: int  # other metrics shown, for information only
    outcome: str  # ValueDecision.outcome
    adhoc: bool
    not_applied: bool

    @property
    def sentence(self) -> str:
        title = f"{self.title} ({ADHOC})" if self.adhoc else self.title
        if self.not_applied:
            return f"{title}: not applied by the engine, so no verdict"
        objective = [d for d in self.primaries if d.role == "objective"]
        guards = [d for d in self.primaries if d.role == "guard"]
        parts = []
        if objective:
            parts.append(f"objective {objective[0].text}")
        if guards:
            plural = "s" if len(guards) != 1 else ""
            parts.append(f"guard{plural} " + ", ".join(g.text for g in guards))
        if self.information:
            n = self.information
            parts.append(f"{n} other metric{'s' if n != 1 else ''} {INFORMATION}")
        return f"{title}: " + ("; ".join(parts) or "no primary metric measured")

    @property
    def decided(self) -> tuple[Decided, ...]:
        """The primaries decided better or worse."""
        return tuple(d for d in self.primaries if d.change.verdict in ("better", "worse"))

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.side,
            "baseline": self.baseline,
            "sentence": self.sentence,
            "outcome": self.outcome,
            "ad_hoc": self.adhoc,
            "primaries": [
                {
                    "metric": d.metric.key,
                    "role": d.role,
                    "verdict": d.change.verdict,
                    "change_pct": None if (r := d.change.rel_change) is None else r * 100,
                    "change_diff": d.change.diff,
                    "confidence": d.change.confidence,
                }
                for d in self.primaries
            ],
            "for_information": self.information,
            "not_applied": self.not_applied,
        }


@dataclass(frozen=True)
class Headline:
    """A comparison's sentences, the rule behind them, and the recommendation or what would
    decide it."""

    candidates: tuple[CandidateHeadline, ...]
    rule: str  # how the decision was made (or that it is an ad-hoc look)
    recommendation: str | None  # only a decided one: set a value (Preference kind "value")
    closing: str | None  # the last line: 'Recommendation: ...', 'Decision: keep ...', 'Not
    # decided: <what would decide it>' or why there is no recommendation
    kind: str = "none"  # the preference's kind: value, default, keep or none
    next_step: str | None = None  # what would decide it ('3 more runs a side, about 6 min ...')
    notes: tuple[str, ...] = ()  # the decision's notes (a fall back from resident engines, ...)

    @property
    def sentences(self) -> list[str]:
        return [c.sentence for c in self.candidates]

    @property
    def lines(self) -> list[str]:
        """What a text report opens with: the sentences, the rule, its notes, then the closing
        line."""
        if not self.candidates:
            return [self.closing] if self.closing else []
        closing = [self.closing] if self.closing else []
        return [*self.sentences, self.rule, *self.notes, *closing]

    def to_json(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "rule": self.rule,
            "recommendation": self.recommendation,
            "closing": self.closing,
            "next_step": self.next_step,
            "notes": list(self.notes),
            "candidates": [c.to_json() for c in self.candidates],
        }


def title(side: Side, baseline: Side) -> str:
    """'kv-cache-memory-bytes 16 GiB vs 1 GiB' for two values of one parameter, else the two
    labels."""
    if side.param and side.param == baseline.param and side.value is not None:
        base = "unset" if baseline.value is None else show_value(side.param, baseline.value)
        return f"{side.param} {show_value(side.param, side.value)} vs {base}"
    return f"{side.label} vs {baseline.label}"


def rule_text(decision: Decision) -> str:
    """How the decision was made, in one sentence."""
    p = decision.primaries
    n = len(p.guards)
    family = f"the objective and {n} guard{'s' if n != 1 else ''}" if n else "the objective"
    alpha = f"{decision.alpha * 100:g} %"
    if decision.rule == "ad-hoc":
        return (
            f"Ad-hoc look ({decision.reason}): no stopping rule, each metric at a plain "
            f"{level_text(1 - decision.alpha)}, uncorrected: not a decision, never a "
            "recommendation."
        )
    if decision.rule == "fixed-n":
        runs = "/".join(str(n) for n in decision.looks) or "no"
        head = f"Judged by the fixed-repeats test: one look at {runs} runs a side"
    else:
        looks = ", ".join(str(n) for n in decision.looks)
        each = (
            f", each spending α = {decision.look_alpha * 100:.2g} %" if decision.look_alpha else ""
        )
        head = f"Judged by repeat until decided: looks at {looks} runs a side{each}"
        reason = decision.reason
        if reason:
            head += f"; {reason}" if reason.startswith("stopped") else f"; stopped: {reason}"
    state = "" if decision.complete else " (the experiment is still running)"
    return (
        f"{head}; Holm over {family} ({p.text()}), family-wise false-alarm rate ≤ {alpha}"
        f"{state}. Other metrics: {INFORMATION}."
    )


def candidate_headline(comparison: Comparison, side: Side, decision: Decision) -> CandidateHeadline:
    """One candidate's sentence, from the decision record's verdicts for its value."""
    found: ValueDecision | None = decision.value(side.value)
    primaries: list[Decided] = []
    keys = decision.primaries.keys
    for key in keys:
        metric = METRIC_BY_KEY[key]
        mine = found.metric(key) if found else None
        change = mine.change if mine else comparison.changes.get((side.label, key))
        if change is not None:
            primaries.append(Decided(metric, change, decision.primaries.role(key)))
    shown = {m.key for m in comparison.metrics}
    base = comparison.baseline
    not_applied = bool(side.not_applied or base.not_applied or (found and found.not_applied))
    return CandidateHeadline(
        side.label,
        base.label,
        title(side, base),
        tuple(primaries),
        len(shown - set(keys)),
        found.outcome if found else "undecided",
        not decision.decides,
        not_applied,
    )


def headline(
    comparison: Comparison,
    decision: Decision,
    preference: Preference | None = None,
    command: str | None = None,
) -> Headline:
    """Every candidate's sentence, the rule, and the recommendation when the decision makes one
    (else what would decide it; `command` is the CLI line that runs it)."""
    kind = preference.kind if preference is not None else "none"
    text = preference.text if preference is not None else None
    step = decision.next_step
    next_step = None
    if decision.decides and decision.complete and step is not None and decision.undecided:
        next_step = f"{step.text()}, would likely decide it" + (f": {command}" if command else "")
    closing: str | None
    if kind == "value":
        closing = f"Recommendation: {text}"
    elif kind in ("default", "keep"):
        closing = f"Decision: {text}"
    elif next_step is not None:
        closing = f"Not decided: {next_step}"
    else:
        closing = text
    return Headline(
        tuple(candidate_headline(comparison, s, decision) for s in comparison.candidates),
        rule_text(decision),
        text if kind == "value" else None,
        closing,
        kind,
        next_step,
        decision.notes if decision.decides else (),
    )
