"""How complete a run's samples are: the rows the recorder dropped or had not stored when the run's
peaks were taken, and the ticks its samplers skipped, counted per run, stored in the run's health
(`health["samples"]`) and put in words wherever a run's numbers are shown, so a memory series with
holes is flagged rather than passed as complete.

Rows are lost when the sink (the DB) refuses them: the recorder keeps at most `max_pending`, drops
the oldest beyond that, and at stop whatever one last retry could not store. A sampler that runs
late (a slow read, a starved CPU) skips the ticks it missed instead of bursting: its series is
thinner than its period says, and a peak may fall between two of its points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.records import SampleRow

# The series a run's memory peaks are taken from (tuning.measure.telemetry.peaks).
MEMORY_SERIES = ("tree_rss_bytes", "gpu_used_bytes", "gpu_tree_bytes")
# A memory sampler that skipped more than this share of its ticks is thinned: more than one point
# in ten missing, a short spike (an allocation freed again) can fall between two of its points.
THIN_SHARE = 0.10


def count_series(rows: Iterable[SampleRow]) -> Counter[str]:
    """Rows per series name."""
    return Counter(r.series for r in rows)


@dataclass(frozen=True)
class Ticks:
    """One sampler's ticks: taken (a sample was read) and due (taken + skipped); whether its rows
    are a memory series, and how many rows it produced (a GPU sampler without a GPU makes none)."""

    taken: int
    due: int
    memory: bool
    rows: int

    @property
    def thinned(self) -> bool:
        return (
            self.memory and self.rows > 0 and self.due > 0 and self.skipped > THIN_SHARE * self.due
        )

    @property
    def skipped(self) -> int:
        return max(0, self.due - self.taken)


@dataclass(frozen=True)
class SampleLoss:
    """What a recorder lost, from its start (or since an earlier snapshot: `since`)."""

    dropped: Mapping[str, int] = field(default_factory=dict)  # series -> rows never stored
    unstored: Mapping[str, int] = field(default_factory=dict)  # series -> rows not stored yet
    ticks: Mapping[str, Ticks] = field(default_factory=dict)  # sampler -> its ticks

    def since(self, earlier: SampleLoss) -> SampleLoss:
        """This snapshot less an earlier one of the same recorder (a reused server's next run)."""
        dropped = Counter(self.dropped)
        dropped.subtract(earlier.dropped)
        ticks = {}
        for name, now in self.ticks.items():
            was = earlier.ticks.get(name, Ticks(0, 0, now.memory, 0))
            ticks[name] = Ticks(
                now.taken - was.taken, now.due - was.due, now.memory, now.rows - was.rows
            )
        return SampleLoss({k: v for k, v in dropped.items() if v > 0}, dict(self.unstored), ticks)

    def to_json(self) -> dict[str, Any]:
        """The run's `health["samples"]`; `complete` is False when a row was lost or a memory
        series thinned."""
        lost = {k: v for k, v in (Counter(self.dropped) + Counter(self.unstored)).items() if v > 0}
        ticks = {
            n: {"taken": t.taken, "due": t.due, "memory": t.memory} for n, t in self.ticks.items()
        }
        thinned = sorted(n for n, t in self.ticks.items() if t.thinned)
        return {
            "complete": not lost and not thinned,
            "lost_rows": lost,
            "dropped_rows": dict(self.dropped),
            "unstored_rows": dict(self.unstored),
            "ticks": ticks,
            "thinned": thinned,
        }


def _count(value: Any) -> int:
    """A stored count (perhaps an imported bundle's): a non-negative int, else 0."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, number)


def sample_gaps(health: Mapping[str, Any] | None) -> list[str]:
    """What the run's samples lack, in words (empty: complete, or not recorded); the caller
    escapes them for where it prints (a name comes from the stored row)."""
    samples = (health or {}).get("samples")
    if not isinstance(samples, Mapping) or samples.get("complete") is not False:
        return []
    lost = samples.get("lost_rows")
    lost = {str(k): _count(v) for k, v in lost.items()} if isinstance(lost, Mapping) else {}
    words = []
    memory = sum(n for series, n in lost.items() if series in MEMORY_SERIES)
    if memory:
        words.append(
            f"memory series incomplete: {memory:,} of its samples never reached the DB, so its "
            "peak may be missing"
        )
    other = sum(n for series, n in lost.items() if series not in MEMORY_SERIES)
    if other:
        words.append(f"samples incomplete: {other:,} rows of other series never reached the DB")
    ticks = samples.get("ticks")
    for name in samples.get("thinned") or []:
        tick = ticks.get(name) if isinstance(ticks, Mapping) else None
        if isinstance(tick, Mapping):
            taken, due = _count(tick.get("taken")), _count(tick.get("due"))
            words.append(
                f"memory series thinned: {name} sampled {taken:,} of {due:,} ticks (it ran late), "
                "so a short peak may fall between its points"
            )
    return words
