"""Words a user knows for what the store keeps as keys: a run's or experiment's phase
(`waiting_health` -> "waiting for the server to answer"), a metric key (`output_throughput` ->
"output throughput", from the metric catalog), why a run failed (`out_of_memory` -> "out of
memory") and a missing value ("—", never "None")."""

from __future__ import annotations

import re
from typing import Any

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


_KIND = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
# Why a run failed, as the runner stores it (tuning.engine.server's classification of a failed
# start, tuning.experiment.outcome's lab kinds); any other kind reads with its underscores as
# spaces.
FAILURE_WORDS = {
    "oom": "out of memory",
    "out_of_memory": "out of memory",
    "invalid_argument": "a flag vLLM refused",
    "port_in_use": "port already in use",
    "engine_init": "the engine failed to initialize",
    "engine_died": "the engine died",
    "timeout": "no answer to /health in time",
    "requests_failed": "requests failed",
    "runner_died": "the lab's runner died",
    "lab_error": "a lab error",
    "store_error": "the database refused a write",
    "stop_failed": "the server did not stop",
    "measurement_error": "the measurement failed",
}


def failure_words(kind: Any) -> str:
    """Why a run failed, in words; "" when it did not."""
    if kind is None or kind == "":
        return ""
    text = str(kind)
    if text in FAILURE_WORDS:
        return FAILURE_WORDS[text]
    return text.replace("_", " ") if _KIND.fullmatch(text) else text  # other text as it is


def metric_words(key: Any) -> str:
    """A metric's label from the catalog (`output_throughput` -> "output throughput")."""
    return "—" if key is None or key == "" else metric_label(key)
