"""The measured parts of stored runs, for the estimate (tuning.experiment.estimate): each run's
start (time to healthy; a cold one, whose server compiled its graphs anew, apart from the warm
ones), or its switch (a resident server woken instead: tuning.experiment.switch_cost), its load,
its output tokens per second and the rest of its wall time, each read through a
sane range (core.plausible) so that one impossible stored value is left out and said, never
averaged in.

A run's wall time is its stored anatomy's (tuning.experiment.run_anatomy: from the previous
run's end to its own, the previous server's stop included) where it has one, else its stored
start to end.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.plausible import MAX_PART_S, MAX_TOKENS_PER_S, in_range, shown
from tuning.engine.startup_anatomy import COLD


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{round(seconds):d} s"


def span_s(start: Any, end: Any) -> float | None:
    """Seconds between two stored ISO stamps; None when one is missing or unreadable."""
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _switched(row: Mapping[str, Any]) -> bool:
    """Whether the run's server was a resident one switched to (a timings row says it in a
    column, a run row in its startup facts)."""
    startup = row.get("startup")
    mode = row.get("resident_mode") or (
        startup.get("resident") if isinstance(startup, Mapping) else None
    )
    return mode == "switch"


def _switch_s(row: Mapping[str, Any]) -> Any:
    """The seconds of the run's `switch` part (its anatomy), None when not stored."""
    if "switch_s" in row:
        return row.get("switch_s")
    anat = row.get("anatomy")
    parts = anat.get("parts") if isinstance(anat, Mapping) else None
    found = [
        p.get("seconds")
        for p in parts or ()
        if isinstance(p, Mapping)
        and p.get("key") == "switch"
        and isinstance(p.get("seconds"), int | float)
    ]
    return sum(found) if found else None


class _Sane:
    """Stored values read through a sane range; what falls outside is kept in words."""

    def __init__(self) -> None:
        self.ignored: list[str] = []

    def part(self, row: Mapping[str, Any], what: str, value: Any) -> float | None:
        """`value` (seconds) when it is a part one run can take; None, noted, when it is not."""
        if value is None:
            return None
        sane = in_range(value, 0.0, MAX_PART_S)
        if sane is None:
            self.ignored.append(f"run {row.get('id', '?')}'s {what} {shown(value)} s")
        return sane

    def rate(self, row: Mapping[str, Any], tokens: Any, load: float) -> float | None:
        """Output tokens of a load when tokens / load is a throughput a server can reach."""
        got = in_range(tokens, 0.0, MAX_TOKENS_PER_S * MAX_PART_S)
        if got and load > 0 and got / load <= MAX_TOKENS_PER_S:
            return got
        if tokens is not None and got != 0:
            self.ignored.append(f"run {row.get('id', '?')}'s {shown(tokens)} tokens in {_s(load)}")
        return None

    def note(self) -> str:
        if not self.ignored:
            return ""
        n = len(self.ignored)
        head = f"ignored {n} stored value{'s' if n != 1 else ''} outside a sane range"
        return f"{head}: {', '.join(self.ignored[:3])}" + (", ..." if n > 3 else "")


@dataclass(frozen=True)
class Parts:
    """The measured parts of some runs (each list holds the runs that measured it), and the
    stored values left out as outside a sane range (`ignored`, in words)."""

    starts: list[float]
    loads: list[float]
    tok_s: list[tuple[float, float]]  # (output tokens, load seconds)
    rests: list[float]
    ignored: str = ""
    cold: list[float] = field(default_factory=list)  # the starts that compiled anew
    warm: list[float] = field(default_factory=list)  # the others
    switches: list[float] = field(default_factory=list)  # resident servers switched instead

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Parts:
        starts, loads, tok_s, rests = [], [], [], []
        cold: list[float] = []
        warm: list[float] = []
        switches: list[float] = []
        sane = _Sane()
        for row in rows:
            noted = len(sane.ignored)
            start = sane.part(row, "time to healthy", row.get("time_to_healthy_s"))
            load = sane.part(row, "load", row.get("duration"))
            wall = span_s(row.get("started_at"), row.get("finished_at"))
            if row.get("anatomy_wall_s") is not None:  # the whole window, the stop included
                wall = sane.part(row, "wall time", row.get("anatomy_wall_s"))
            switch = None
            if _switched(row):  # a woken server: its switch, no start
                switch = sane.part(row, "switch", _switch_s(row))
            if len(sane.ignored) > noted:  # a part left out: the rest cannot be told either
                wall = None
            if switch is not None:
                switches.append(switch)
            if start is not None:
                starts.append(start)
                (cold if row.get("compile_state") in COLD else warm).append(start)
            if load is not None:
                loads.append(load)
                tokens = sane.rate(row, row.get("total_output_tokens"), load)
                if tokens and load > 0:
                    tok_s.append((tokens, load))
            if wall is not None:  # a row without parts is all rest
                rest = wall - (start or 0.0) - (load or 0.0) - (switch or 0.0)
                kept = 0.0 if rest <= 0 else sane.part(row, "stop and rest", rest)
                if kept is not None:
                    rests.append(kept)
        return cls(starts, loads, tok_s, rests, sane.note(), cold, warm, switches)

    @property
    def count(self) -> int:
        return max(len(self.loads), len(self.starts), len(self.rests))


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None
