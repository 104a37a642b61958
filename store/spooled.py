"""Storing a run's requests that reached the DB late (from the runner's spool file, written when
its final write could not be trusted to succeed: tuning.experiment.spool): what the run already
holds, and adding the rest in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlite_utils import Database

from core.records import RequestRecord
from store import repo
from store.db import write_transaction


def request_count(db: Database, run_id: int) -> int:
    return int(db.execute("select count(*) from requests where run_id = ?", [run_id]).fetchone()[0])


def store_late(
    db: Database,
    run_id: int,
    records: Sequence[RequestRecord],
    summary: dict[str, Any],
    note: str,
) -> int | None:
    """What the run lacks of `records` and `summary` (its request rows when it has none, the
    summary when it has none), with `note` appended to its failure reason, all or nothing,
    decided inside the write lock (two processes storing one spool file add it once); the rows
    added, or None when the run lacked nothing."""
    with write_transaction(db):
        row = next(
            iter(db.query("select summary_json, failure_reason from runs where id = ?", [run_id])),
            None,
        )
        if row is None:
            return None
        added = repo.insert_requests(db, run_id, records) if not request_count(db, run_id) else 0
        if row["summary_json"] is None:
            repo.store_summary(db, run_id, summary)
        elif not added:
            return None
        reason = str(row["failure_reason"] or "")
        repo.update_run(db, run_id, failure_reason=f"{reason}; {note}" if reason else note)
    return added
