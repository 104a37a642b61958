"""The metrics an experiment declares primary: its objective (what it tries to improve; default
output throughput) and its guards (what must not get worse; default p99 TTFT and p99 TPOT).

Only these decide: the decision holds the family-wise false-alarm rate across them (Holm,
tuning.compare.holm) and a recommendation needs the objective decided better and no guard decided
worse. Every other metric is shown "for information, not corrected". Stored on the experiment
(`experiments.objective`, `experiments.guards_json`, m017); an experiment stored before has the
defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuning.compare.catalog import METRIC_BY_KEY, METRICS

DEFAULT_OBJECTIVE = "output_throughput"
DEFAULT_GUARDS: tuple[str, ...] = ("p99_ttft_ms", "p99_tpot_ms")
# Goodput depends on SLOs a comparison may set or not: it cannot be declared before the runs.
NOT_PRIMARY = frozenset({"request_goodput"})


def primary_choices() -> list[str]:
    """The metric keys that may be an objective or a guard: a better direction, stored per run."""
    return [m.key for m in METRICS if m.better != "neither" and m.key not in NOT_PRIMARY]


def _check(key: str, what: str) -> str:
    key = key.strip()
    if key not in METRIC_BY_KEY:
        raise ValueError(f"{what} {key!r}: not a metric; one of {', '.join(primary_choices())}")
    if METRIC_BY_KEY[key].better == "neither":
        raise ValueError(f"{what} {key!r}: has no better direction, so it cannot decide")
    if key in NOT_PRIMARY:
        raise ValueError(f"{what} {key!r}: depends on SLOs a comparison sets afterwards")
    return key


@dataclass(frozen=True)
class Primaries:
    """An objective and its guards (metric keys of tuning.compare.catalog)."""

    objective: str = DEFAULT_OBJECTIVE
    guards: tuple[str, ...] = DEFAULT_GUARDS

    def __post_init__(self) -> None:
        _check(self.objective, "--objective")
        for guard in self.guards:
            _check(guard, "--guard")
        if self.objective in self.guards:
            raise ValueError(f"--guard {self.objective}: it is already the objective")
        if len(set(self.guards)) != len(self.guards):
            raise ValueError(f"--guard names a metric twice: {', '.join(self.guards)}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The objective, then the guards: the family the decision corrects over."""
        return (self.objective, *self.guards)

    def role(self, key: str) -> str:
        """'objective', 'guard' or 'for information' (any other metric)."""
        if key == self.objective:
            return "objective"
        return "guard" if key in self.guards else "for information"

    def text(self) -> str:
        """'objective output throughput; guards p99 TTFT, p99 TPOT'."""
        guards = ", ".join(METRIC_BY_KEY[g].label for g in self.guards) or "none"
        return f"objective {METRIC_BY_KEY[self.objective].label}; guards {guards}"

    def columns(self) -> dict[str, Any]:
        """The experiment row's columns for these primaries (m017)."""
        return {"objective": self.objective, "guards_json": list(self.guards)}

    def to_json(self) -> dict[str, Any]:
        return {"objective": self.objective, "guards": list(self.guards)}

    @classmethod
    def of(cls, row: Mapping[str, Any] | None) -> Primaries:
        """An experiment's (or a stored record's) primaries; the defaults where none is stored
        (an experiment from before m017, or an ad-hoc comparison)."""
        if not row:
            return cls()
        objective = row.get("objective") or DEFAULT_OBJECTIVE
        guards = row.get("guards")
        if not isinstance(guards, list):
            return cls(str(objective))
        return cls(str(objective), tuple(str(g) for g in guards))

    @classmethod
    def parse(cls, objective: str | None, guards: Iterable[str] | None) -> Primaries:
        """From the CLI or the form: None keeps a default; guards may be comma-separated; an
        empty guard list ('none') declares no guard. ValueError names the flag."""
        items = [g.strip() for item in guards or () for g in str(item).split(",") if g.strip()]
        objective = (objective or DEFAULT_OBJECTIVE).strip()
        if guards is None or not items:  # the defaults, less the objective if it is one
            picked: Sequence[str] = [g for g in DEFAULT_GUARDS if g != objective]
        elif items == ["none"]:
            picked = ()
        else:
            picked = items
        return cls(objective, tuple(picked))
