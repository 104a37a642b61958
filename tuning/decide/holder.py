"""Who holds this machine: one answer, in one wording, for Home, Live, New experiment, the search
form and `busy_reason` (a page once said nothing was running while another said an experiment
held the machine, and neither named it).

The runner lock (tuning.experiment.lock) is the truth across labs: its holder wrote its pid, lab
DB and experiment into it, and a search whose step that experiment is gets named as the search.
With the lock free, this lab's own rows still count: a search between two steps, or an
experiment whose runner has not taken the lock yet.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import StoreError, connect, queries
from tuning.decide.search.names import shown_name, step_ids
from tuning.decide.search.record import search_alive, step_prefix
from tuning.experiment.lock import lock_holder


@dataclass(frozen=True)
class Holder:
    """What runs: an experiment or a search (by id, in its lab DB, with its process id)."""

    kind: str  # "experiment", "search", or "runner" (a lock whose holder wrote nothing)
    id: int | None = None
    name: str = ""
    db: str = ""
    pid: int | None = None

    def line(self) -> str:
        """'experiment 3 'kv sweep' in /labs/lab.db, pid 1234', the same words everywhere."""
        where = f" in {self.db}" if self.db else ""
        pid = f", pid {self.pid}" if self.pid else ""
        if self.kind == "search":
            return f"search {self.id} ({self.name}){where}{pid}"
        if self.kind == "experiment":
            return f"experiment {self.id} '{self.name}'{where}{pid}"
        return f"another runner (it did not say which lab){pid}"


def _search_of(db: Any, exp: Mapping[str, Any]) -> dict[str, Any] | None:
    """The running search the experiment is a step of, if any."""
    name = str(exp.get("name") or "")
    for row in queries.list_searches(db, active_only=True):
        if name.startswith(step_prefix(str(row["key"]))) and search_alive(row):
            return row
    return None


def _from_lock(record: Mapping[str, Any]) -> Holder:
    """The lock's holder, named from its own lab DB when that can be read."""
    pid = int(record["pid"]) if str(record.get("pid", "")).isdigit() else None
    db_file, exp_id = str(record.get("db") or ""), record.get("experiment")
    if not db_file or not isinstance(exp_id, int):
        return Holder("runner", pid=pid)
    try:
        with connect(db_file, readonly=True) as db:
            exp = queries.get_experiment(db, exp_id)
            search = _search_of(db, exp)
            name = shown_name(exp.get("name"), step_ids(db))  # a plan's step: by its id
    except (StoreError, sqlite3.Error, OSError):  # gone, unreadable, another user's
        return Holder("experiment", exp_id, "?", db_file, pid)
    if search is not None:
        return Holder("search", int(search["id"]), str(search["param"]), db_file, pid)
    return Holder("experiment", exp_id, name, db_file, pid)


def _from_rows(db_path: Path) -> Holder | None:
    """With the lock free: this lab's running search (first: between its steps it holds no
    lock), else its active experiment."""
    if not db_path.exists():
        return None
    where = str(db_path.resolve())
    with connect(db_path, readonly=True) as db:
        for row in queries.list_searches(db, active_only=True):
            if search_alive(row):
                pid = int(row.get("runner_pid") or 0) or None
                return Holder("search", int(row["id"]), str(row["param"]), where, pid)
        for exp in queries.active_experiments(db):
            search = _search_of(db, exp)
            if search is not None:
                pid = int(search.get("runner_pid") or 0) or None
                return Holder("search", int(search["id"]), str(search["param"]), where, pid)
            pid = int(exp.get("runner_pid") or 0) or None
            name = shown_name(exp.get("name"), step_ids(db))  # a plan's step: by its id
            return Holder("experiment", int(exp["id"]), name, where, pid)
    return None


def machine_holder(db_path: Path) -> Holder | None:
    """Who holds this machine now (None: nothing runs, something new may start). Callers reap
    dead rows first (tuning.decide.reaper.reap_dead at a page's top, spawn_search)."""
    record = lock_holder()
    if record is not None:
        return _from_lock(record)
    return _from_rows(db_path)


def holder_line(db_path: Path) -> str | None:
    """'Running on this machine: experiment 3 'kv sweep' in /labs/lab.db, pid 1234', or None."""
    holder = machine_holder(db_path)
    return None if holder is None else f"Running on this machine: {holder.line()}"
