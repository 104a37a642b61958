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
    "hardware",
)
# Read out of a run's JSON in SQL (a malformed cell reads as NULL): its whole window's wall time
# (its anatomy, the previous server's stop included) and whether its start compiled anew.
_WALL = "case when json_valid({p}anatomy_json) then json_extract({p}anatomy_json, '$.wall_s') end"
_COMPILE = (
    "case when json_valid({p}startup_json) "
    "then json_extract({p}startup_json, '$.anatomy.compile_cache.state') end"
)


# ... how its server came to serve it (resident engines: "start" or "switch") and the seconds of
# its anatomy's `switch` part (a resident server slept, the value's woken).
_RESIDENT = (
    "case when json_valid({p}startup_json) then json_extract({p}startup_json, '$.resident') end"
)
_SWITCH = (
    "case when json_valid({p}anatomy_json) then (select sum(json_extract(part.value, "
    "'$.seconds')) from json_each({p}anatomy_json, '$.parts') as part "
    "where json_extract(part.value, '$.key') = 'switch') end"
)


def _json_cols(db: Database, prefix: str) -> str:
    """The JSON-read columns; a DB opened read-only may predate the anatomy column."""
    has_anatomy = "anatomy_json" in db.table("runs").columns_dict
    wall = _WALL if has_anatomy else "null"
    switch = _SWITCH if has_anatomy else "null"
    compiled = _COMPILE.format(p=prefix)
    return (
        f", {wall.format(p=prefix)} as anatomy_wall_s, {compiled} as compile_state"
        f", {_RESIDENT.format(p=prefix)} as resident_mode, {switch.format(p=prefix)} as switch_s"
    )


def done_run_timings(db: Database, limit: int = 400) -> list[dict[str, Any]]:
    """The newest measured runs of local experiments, newest first, with their experiment's
    engine_json, base_url and model (to match the engine). Fleet experiments are left out: their
    runs went in parallel on other machines."""
    cols = ", ".join(f"r.{c}" for c in TIMING_COLUMNS) + _json_cols(db, "r.")
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
    cols = ", ".join(TIMING_COLUMNS) + _json_cols(db, "")
    sql = f"select {cols}, status, failure_kind from runs where experiment_id = ? order by seq, id"
    return [dict(row) for row in db.query(sql, [int(experiment_id)])]


def started_configs(db: Database, limit: int = 2000) -> list[dict[str, Any]]:
    """The configuration of every run of a local experiment whose server started here (time to
    healthy stored), newest first, with its hardware and its experiment's engine: which
    configurations have compiled on this machine."""
    sql = (
        "select r.config_json, r.hardware, e.engine_json, e.base_url, e.model from runs r "
        "join experiments e on e.id = r.experiment_id where r.time_to_healthy_s is not null "
        "and coalesce(e.origin, 'local') = 'local' order by r.id desc limit ?"
    )
    return [dict(row) for row in db.query(sql, [int(limit)])]
