"""Declare an experiment's primary metrics (tuning.compare.primaries: its objective and guards) on
its row, once it is planned and before it runs: the stopping rule and the decision record read
them from there. Called by the CLI (`experiment --objective --guard`) and New experiment."""

from __future__ import annotations

from pathlib import Path

from store import connect, repo
from tuning.compare.primaries import Primaries


def declare(db_path: str | Path, experiment_id: int, primaries: Primaries) -> None:
    """Store `primaries` on experiment `experiment_id` (the defaults are stored too: the row then
    says what decided it, whatever the defaults become)."""
    with connect(db_path) as db:
        repo.update_experiment(db, experiment_id, **primaries.columns())
