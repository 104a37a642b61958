"""The drift of the machine during an experiment, measured where nothing else changed: the
baseline's first run against its last (same configuration, so any change between them is the
machine, the neighbours or the engine's warm state, not the value). Shown beside the verdicts: a
drift as large as the changes being judged says the order (A B B A cancels a steady drift, not a
jump) and the repeats carry the verdict, not the values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuning.compare.catalog import Metric

Run = Mapping[str, Any]


@dataclass(frozen=True)
class Drift:
    """One metric's change from the baseline's first measured run to its last."""

    metric: str
    first_run: int
    last_run: int
    first: float
    last: float

    @property
    def rel_change(self) -> float | None:
        """(last - first) / first; None when the first is 0."""
        return (self.last - self.first) / abs(self.first) if self.first else None

    def to_json(self) -> dict[str, Any]:
        rel = self.rel_change
        return {
            "metric": self.metric,
            "first_run": self.first_run,
            "last_run": self.last_run,
            "first": self.first,
            "last": self.last,
            "change_pct": None if rel is None else rel * 100,
        }


def _time_key(run: Run) -> tuple[str, int, int]:
    """When a run ran: its start (ISO text sorts in time), then its place in the plan."""
    seq = run.get("seq")
    return (str(run.get("started_at") or ""), seq if seq is not None else 1 << 30, int(run["id"]))


def baseline_drift(
    members: Sequence[Run],
    per_run: Mapping[str, Mapping[int, float | None]],
    metrics: Sequence[Metric],
) -> list[Drift]:
    """For each metric, the baseline's first and last runs (`members`, in the order they ran)
    with a value of it in `per_run` (metric -> run id -> value, the Side's); [] under two."""
    ordered = [int(r["id"]) for r in sorted(members, key=_time_key)]
    out = []
    for metric in metrics:
        values = per_run.get(metric.key) or {}
        have = [(rid, v) for rid in ordered if (v := values.get(rid)) is not None]
        if len(have) < 2:
            continue
        (first_id, first), (last_id, last) = have[0], have[-1]
        out.append(Drift(metric.key, first_id, last_id, first, last))
    return out
