"""The statuses of experiments and runs, in one place, with the one set that means "still going"."""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """What a stored experiment or run is doing; stored as its plain value ("running", ...)."""

    QUEUED = "queued"  # an experiment written, its runner not yet started
    PENDING = "pending"  # a run row written, not yet started
    RUNNING = "running"
    DONE = "done"
    # A run measured to the end whose numbers cannot be true (core.plausible: a server's usage or
    # counters that lie); its health's "suspect" list says why. Kept and shown, never counted in
    # a verdict, a reuse or an estimate unless the user includes it.
    SUSPECT = "suspect"
    FAILED = "failed"
    CANCELLED = "cancelled"


# A row in one of these states still belongs to a live runner: never delete, export or compare it.
ACTIVE: frozenset[str] = frozenset({Status.QUEUED, Status.PENDING, Status.RUNNING})
# A run in one of these states measured its load to the end (a result, not run again on resume).
MEASURED: frozenset[str] = frozenset({Status.DONE, Status.SUSPECT})


def is_active(status: str | None) -> bool:
    return status in ACTIVE


def suspect_reasons(run: Mapping[str, Any]) -> list[str]:
    """Why a stored run is `suspect`, in words (its health's "suspect" list, as
    tuning.experiment.outcome wrote it); [] for a run that is not."""
    if run.get("status") != Status.SUSPECT:
        return []
    health = run.get("health")
    if health is None and isinstance(run.get("health_json"), str):
        try:
            health = json.loads(run["health_json"])
        except ValueError:
            health = None
    reasons = health.get("suspect") if isinstance(health, Mapping) else None
    if not isinstance(reasons, list) or not reasons:
        return ["its numbers failed a plausibility check"]
    return [str(r) for r in reasons]
