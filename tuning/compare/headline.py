"""The decision at a glance: one sentence per candidate that the Compare page, the HTML report and
`compare` (CLI) open with, so a reader sees what changed before any table.

A sentence names the candidate against the baseline, then its decided metrics (better or worse)
with their change, in the catalogue's order: the lab's lead metrics (sequential.DEFAULT_METRICS)
whenever decided, topped up with other decided metrics to NAMED; the decided metrics past those
are counted, and the undecided and equivalent ones are folded into one count each:

    kv-cache-memory-bytes 16 GiB vs 1 GiB: output throughput +212.6 % (better),
    mean TTFT -95.6 % (better), mean TPOT +31.6 % (worse); 14 more decided (9 better, 5 worse);
    3 metrics undecided; 1 equivalent

The recommendation (tuning.compare.prefer) follows the sentences when the lab has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuning.compare.catalog import Metric
from tuning.compare.comparison import Comparison, Side
from tuning.compare.prefer import Preference
from tuning.compare.present import CLEAR, fmt, pct_text
from tuning.compare.sequential import DEFAULT_METRICS
from tuning.compare.stats import Change
from tuning.engine.params import show_value

# How many decided metrics a sentence names at least (when that many are decided).
NAMED = 3


@dataclass(frozen=True)
class Decided:
    """One decided metric of a candidate: its change and the verdict."""

    metric: Metric
    change: Change

    @property
    def text(self) -> str:
        """'mean TTFT -95.6 % (better)'; a change from a zero baseline names both means."""
        c = self.change
        if c.rel_change is not None:
            moved = pct_text(c.rel_change)
        else:
            unit = self.metric.unit
            moved = f"{fmt(c.base_mean, unit)} → {fmt(c.cand_mean, unit)}"
        return f"{self.metric.label} {moved} ({c.verdict})"


@dataclass(frozen=True)
class CandidateHeadline:
    """What one candidate's sentence says, kept as data for the JSON and the page's folds."""

    side: str  # the candidate's label
    baseline: str  # the baseline's label
    title: str  # 'param X vs Y' or 'label vs label'
    decided: tuple[Decided, ...]  # every decided metric, in the catalogue's order
    named: tuple[Decided, ...]  # the ones the sentence names, in the catalogue's order
    undecided: tuple[Metric, ...]
    equivalent: tuple[Metric, ...]
    not_applied: bool

    @property
    def more(self) -> tuple[Decided, ...]:
        """The decided metrics the sentence counts rather than names."""
        return tuple(d for d in self.decided if d not in self.named)

    @property
    def sentence(self) -> str:
        if self.not_applied:
            return f"{self.title}: not applied by the engine, so no verdict"
        parts = [", ".join(d.text for d in self.named) or "no metric decided better or worse"]
        if more := self.more:
            better = sum(d.change.verdict == "better" for d in more)
            counts = [(better, "better"), (len(more) - better, "worse")]
            split = ", ".join(f"{n} {word}" for n, word in counts if n)
            parts.append(f"{len(more)} more decided ({split})")
        if self.undecided:
            n = len(self.undecided)
            parts.append(f"{n} metric{'s' if n != 1 else ''} undecided")
        if self.equivalent:
            parts.append(f"{len(self.equivalent)} equivalent")
        return f"{self.title}: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.side,
            "baseline": self.baseline,
            "sentence": self.sentence,
            "decided": [
                {
                    "metric": d.metric.key,
                    "verdict": d.change.verdict,
                    "change_pct": None if (r := d.change.rel_change) is None else r * 100,
                }
                for d in self.decided
            ],
            "undecided": [m.key for m in self.undecided],
            "equivalent": [m.key for m in self.equivalent],
            "not_applied": self.not_applied,
        }


@dataclass(frozen=True)
class Headline:
    """A comparison's sentences, one per candidate, and the recommendation when there is one."""

    candidates: tuple[CandidateHeadline, ...]
    recommendation: str | None  # Preference.text when it keeps the default or sets a value

    @property
    def sentences(self) -> list[str]:
        return [c.sentence for c in self.candidates]

    @property
    def lines(self) -> list[str]:
        """What a text report opens with: the sentences, then 'Recommendation: ...'."""
        rec = [f"Recommendation: {self.recommendation}"] if self.recommendation else []
        return [*self.sentences, *rec]


def title(side: Side, baseline: Side) -> str:
    """'kv-cache-memory-bytes 16 GiB vs 1 GiB' for two values of one parameter, else the two
    labels."""
    if side.param and side.param == baseline.param and side.value is not None:
        base = "unset" if baseline.value is None else show_value(side.param, baseline.value)
        return f"{side.param} {show_value(side.param, side.value)} vs {base}"
    return f"{side.label} vs {baseline.label}"


def _named(decided: Sequence[Decided], lead: Sequence[str]) -> tuple[Decided, ...]:
    """The lead metrics decided, topped up to NAMED with the other decided ones; catalogue order."""
    first = [d for d in decided if d.metric.key in lead]
    rest = [d for d in decided if d.metric.key not in lead]
    keep = {id(d) for d in [*first, *rest[: max(0, NAMED - len(first))]]}
    return tuple(d for d in decided if id(d) in keep)


def candidate_headline(
    comparison: Comparison, side: Side, lead: Sequence[str] = DEFAULT_METRICS
) -> CandidateHeadline:
    """One candidate's sentence, from the comparison's own verdicts."""
    decided: list[Decided] = []
    undecided: list[Metric] = []
    equivalent: list[Metric] = []
    not_applied = False
    for metric in comparison.metrics:  # the catalogue's order
        change = comparison.changes.get((side.label, metric.key))
        if change is None:
            continue
        if change.verdict in CLEAR:
            decided.append(Decided(metric, change))
        elif change.verdict == "undecided":
            undecided.append(metric)
        elif change.verdict == "equivalent":
            equivalent.append(metric)
        else:
            not_applied = True
    base = comparison.baseline
    return CandidateHeadline(
        side.label,
        base.label,
        title(side, base),
        tuple(decided),
        _named(decided, lead),
        tuple(undecided),
        tuple(equivalent),
        not_applied,
    )


def headline(comparison: Comparison, preference: Preference | None = None) -> Headline:
    """Every candidate's sentence, and the recommendation when the lab makes one (keep vLLM's
    default or set a value; not when it cannot prefer either)."""
    rec = preference.text if preference is not None and preference.kind != "none" else None
    return Headline(tuple(candidate_headline(comparison, s) for s in comparison.candidates), rec)
