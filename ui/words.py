"""Words a user knows for what the store keeps as keys: a run's or experiment's phase
(`waiting_health` -> "waiting for the server to answer"), a metric key (`output_throughput` ->
"output throughput", from the metric catalog), why a run failed (`out_of_memory` -> "out of
memory") and a missing value ("—", never "None")."""

from __future__ import annotations

from typing import Any

from core.failure_kinds import FAILURE_WORDS as FAILURE_WORDS  # their home: core
from core.failure_kinds import failure_words as failure_words
from tuning.compare.catalog import metric_label

# The phases the runner records (tuning.experiment: run_unit, measure; the load generator's).
PHASE_WORDS = {
    "starting": "starting the server",
    "waiting_health": "waiting for the server to answer",
    "warming_up": "warming up",
    "loading": "sending the workload",
    "storing": "storing the results",
    "stopping": "stopping the server",
    "queued": "waiting its turn",
}


def or_dash(value: Any) -> str:
    """A value as text; nothing stored reads "—"."""
    return "—" if value is None or value == "" else str(value)


def phase_words(phase: Any) -> str:
    """A phase in words; an unknown one with its underscores as spaces."""
    if phase is None or phase == "":
        return "—"
    return PHASE_WORDS.get(str(phase), str(phase).replace("_", " "))


def metric_words(key: Any) -> str:
    """A metric's label from the catalog (`output_throughput` -> "output throughput")."""
    return "—" if key is None or key == "" else metric_label(key)
