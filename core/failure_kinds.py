"""Why a run failed, in words a user knows: the store keeps a failure kind as a key
(`out_of_memory`, `runner_died`); every surface (the pages, the CLI's text output) says it in these
words, and only --json and the store keep the key."""

from __future__ import annotations

import re
from typing import Any

_KIND = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
# Why a run failed, as the runner stores it (tuning.engine.server's classification of a failed
# start, tuning.experiment.outcome's lab kinds, the fleet's); any other kind reads with its
# underscores as spaces.
FAILURE_WORDS = {
    "oom": "out of memory",
    "out_of_memory": "out of memory",
    "invalid_argument": "a flag vLLM refused",
    "port_in_use": "port already in use",
    "engine_init": "the engine failed to initialize",
    "engine_died": "the engine died",
    "crashed": "the server exited before it was healthy",
    "timeout": "no answer to /health in time",
    "requests_failed": "requests failed",
    "runner_died": "the lab's runner died",
    "lab_error": "a lab error",
    "store_error": "the database refused a write",
    "stop_failed": "the server did not stop",
    "measurement_error": "the measurement failed",
    "worker_error": "the fleet worker raised an error",
    "worker_lost": "the fleet worker was lost",
}


def failure_words(kind: Any) -> str:
    """Why a run failed, in words; "" when it did not."""
    if kind is None or kind == "":
        return ""
    text = str(kind)
    if text in FAILURE_WORDS:
        return FAILURE_WORDS[text]
    return text.replace("_", " ") if _KIND.fullmatch(text) else text  # other text as it is
