"""Reads for time estimates (tuning.experiment.estimate): how long this lab's earlier runs took,
in the parts a run is made of, and what an experiment spends outside its runs.

Only local experiments count (an imported one ran on a teammate's machine), and only runs that
were measured (`done`): a failed start takes a different time than a start that ends healthy.
The engine is matched by the caller (its command and model live in the experiment's engine_json).
"""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

# What a run's time is made of: its wall time (started_at -> finished_at), the start to healthy
# (None when it reused a running server), the load's own duration and the tokens it produced.
TIMING_COLUMNS = (
    "id",
    "experiment_id",
    "started_at",
    "finished_at",
    "time_to_healthy_s",
    "duration",
    "total_output_tokens",
)


def done_run_timings(db: Database, limit: int = 400) -> list[dict[str, Any]]:
    """The newest measured runs of local experiments, newest first, with their experiment's
    engine_json, base_url and model (to match the engine). Fleet experiments are left out: their
    runs went in parallel on other machines."""
    cols = ", ".join(f"r.{c}" for c in TIMING_COLUMNS)
    sql = (
        f"select {cols}, e.engine_json, e.base_url, e.model from runs r "
        "join experiments e on e.id = r.experiment_id where r.status = 'done' "
        "and coalesce(e.origin, 'local') = 'local' and e.fleet_json is null "
        "order by r.id desc limit ?"
    )
    return [dict(row) for row in db.query(sql, [int(limit)])]


def experiment_spans(db: Database, experiment_ids: list[int]) -> list[dict[str, Any]]:
    """For finished experiments: their start and end, and their first run's start and last
    run's end (the time between is the runner's start and the last server's stop)."""
    ids = [int(i) for i in experiment_ids]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    sql = (
        "select e.id, e.started_at, e.finished_at, min(r.started_at) as first_run_at, "
        "max(r.finished_at) as last_run_end from experiments e join runs r "
        f"on r.experiment_id = e.id where e.id in ({marks}) and e.status = 'done' group by e.id"
    )
    return [dict(row) for row in db.query(sql, ids)]


def experiment_run_timings(db: Database, experiment_id: int) -> list[dict[str, Any]]:
    """Every run of one experiment (any status) with its timing columns and status, in order."""
    cols = ", ".join(TIMING_COLUMNS)
    sql = f"select {cols}, status, failure_kind from runs where experiment_id = ? order by seq, id"
    return [dict(row) for row in db.query(sql, [int(experiment_id)])]
