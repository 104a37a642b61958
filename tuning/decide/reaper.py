"""The reaper for everything that shows status: experiments, searches and plans whose process is
gone (SIGKILLed, the machine rebooted) are marked failed before their status is read, so no
command or page shows a dead run as `running`.

It looks first with a read-only connection and writes only when something is to be reaped, so
reading a lab that has nothing to reap (the committed example, a read-only copy) changes nothing;
a DB this process cannot write is shown as stored.
"""

from __future__ import annotations

import os
from pathlib import Path

from store import connect, queries
from store.queries import list_plans
from tuning.decide.search.plan_record import reap_plans
from tuning.decide.search.record import reap_searches, search_alive
from tuning.experiment.supervisor import Reaped, reap, runner_died


def _stale(db_path: Path) -> tuple[bool, bool, bool]:
    """(an active experiment's runner is gone, an active search's process is gone, an active
    plan's process is gone)."""
    with connect(db_path, readonly=True) as db:
        if "experiments" not in db.table_names():  # an empty file: a lab not started yet
            return False, False, False
        experiments = any(runner_died(e) for e in queries.active_experiments(db))
        searches = any(not search_alive(r) for r in queries.list_searches(db, active_only=True))
        plans = any(not search_alive(r) for r in list_plans(db, active_only=True))
    return experiments, searches, plans


def _writable(db_path: Path) -> bool:
    return os.access(db_path, os.W_OK) and os.access(db_path.parent, os.W_OK)


def reap_dead(db_path: str | Path) -> list[Reaped]:
    """Mark what died failed (and stop the servers it left, when provably the lab's); the
    experiments reaped. A missing DB, or nothing dead, writes nothing."""
    path = Path(db_path)
    if not path.is_file():
        return []
    experiments, searches, plans = _stale(path)
    if not (experiments or searches or plans) or not _writable(path):
        return []
    reaped = reap(path) if experiments else []
    if searches:
        reap_searches(path)
    if plans:
        reap_plans(path)
    return reaped


def reaped_text(item: Reaped) -> str:
    """One line about one reaped experiment (the CLI prints it to stderr)."""
    stopped = f"; stopped server pid(s) {item.servers_stopped}" if item.servers_stopped else ""
    left = (
        f"; left pid(s) {item.servers_left} alone (not provably the lab's)"
        if item.servers_left
        else ""
    )
    return (
        f"reaped experiment {item.experiment_id}: runner pid {item.runner_pid} is gone; "
        f"run(s) {item.runs} marked failed [runner_died]{stopped}{left}"
    )
