"""The statuses of experiments and runs, in one place, with the one set that means "still going"."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What a stored experiment or run is doing; stored as its plain value ("running", ...)."""

    QUEUED = "queued"  # an experiment written, its runner not yet started
    PENDING = "pending"  # a run row written, not yet started
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


# A row in one of these states still belongs to a live runner: never delete, export or compare it.
ACTIVE: frozenset[str] = frozenset({Status.QUEUED, Status.PENDING, Status.RUNNING})


def is_active(status: str | None) -> bool:
    return status in ACTIVE
