"""One run's rows out of one database and into another: how a fleet worker's run (measured on its
node with a scratch database) reaches the lab's database, written by the driver only; and the
experiment row the worker's scratch database starts from.

`run_rows` reads the run row as stored (JSON columns as text), its per-request rows and its
samples; the result is plain lists and dicts, so it travels through Ray (or any pickle) as is.
`store_run_rows` writes them onto an existing run of the target database: the run keeps its own
id, uid, experiment, seq and provenance, and takes everything the worker measured.
"""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from store.db import write_transaction

# Columns of the run row the target keeps: who the run is and where it belongs in the lab.
KEEP_COLUMNS = frozenset(
    {"id", "uid", "experiment_id", "seq", "repeat_index", "author", "host", "origin", "notes"}
    | {"tags", "hidden"}
)


def run_rows(db: Database, run_id: int) -> dict[str, Any]:
    """{'run': {...}, 'requests': [...], 'samples': [...]} of one run, rows as stored."""
    run = dict(db.table("runs").get(run_id))
    requests = [
        {k: v for k, v in row.items() if k != "run_id"}
        for row in db.query("select * from requests where run_id = ? order by idx", [run_id])
    ]
    samples = [
        {k: v for k, v in row.items() if k != "run_id"}
        for row in db.query("select * from samples where run_id = ? order by rowid", [run_id])
    ]
    return {"run": run, "requests": requests, "samples": samples}


def store_run_rows(db: Database, run_id: int, rows: dict[str, Any]) -> None:
    """Write a worker's `run_rows` onto run `run_id`: its columns (those this database has),
    its requests and its samples, replacing any the run had, in one write transaction (BEGIN
    IMMEDIATE: sqlite-utils' `atomic()` begins deferred, and its update reads the row first, so a
    heartbeat committed in between failed the whole store with `database is locked` at once)."""
    columns = set(db.table("runs").columns_dict)
    fields = {k: v for k, v in rows["run"].items() if k in columns and k not in KEEP_COLUMNS}
    with write_transaction(db):
        if fields:
            db.table("runs").update(run_id, fields)
        db.execute("delete from requests where run_id = ?", [run_id])
        db.execute("delete from samples where run_id = ?", [run_id])
        requests = [{**r, "run_id": run_id} for r in rows.get("requests") or []]
        if requests:
            db.table("requests").insert_all(requests, batch_size=2000)
        samples = [{**s, "run_id": run_id} for s in rows.get("samples") or []]
        if samples:
            db.table("samples").insert_all(samples, batch_size=5000)


def experiment_row(db: Database, experiment_id: int) -> dict[str, Any]:
    """The experiment row as stored (JSON columns as text): what a fleet worker re-creates, whole,
    so its runs read the same record the local runner reads (no list of chosen columns)."""
    return dict(db.table("experiments").get(experiment_id))


def store_experiment_row(db: Database, row: dict[str, Any]) -> int:
    """Insert `experiment_row(...)` of another database as is (its id and uid too); the columns
    this database lacks are added, so a newer driver's row is never cut short."""
    db.table("experiments").insert(row, alter=True)
    return int(row["id"])
