"""A tuning plan as a row of the store (`plans`, m013), as a search has one
(tuning.decide.search.record, whose patterns it follows): what it searches, the process running it,
its
status and, once ended, its recommendation. `run_plan` writes it at its start and its end,
however it was started; a resumed plan (same key) reuses its row, so one plan is one record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.status import Status
from store import connect, repo
from store.queries import list_plans, plan_id_for_key
from tuning.decide.search.record import ended, search_alive
from tuning.engine.procs import process_start_time
from tuning.settings import load_settings


def _begin(db_path: Path, key: str, spec_json: dict[str, Any]) -> int:
    """The plan's row, running with this process: the row of its key when it resumes, else new."""
    pid = os.getpid()
    fields = {
        "key": key,
        "spec_json": spec_json,
        "status": Status.RUNNING.value,
        "runner_pid": pid,
        "runner_start_time_s": process_start_time(pid),
        "started_at": now_iso(),
        "finished_at": None,
        "error": None,
    }
    with connect(db_path) as db:
        plan_id = plan_id_for_key(db, key)
        if plan_id is None:
            settings = load_settings()
            return repo.create_plan(
                db, author=settings.resolved_author(), host=settings.resolved_host(), **fields
            )
        repo.update_plan(db, plan_id, **fields)
        return plan_id


def _end(db_path: Path, plan_id: int, status: Status, **fields: Any) -> None:
    with connect(db_path) as db:
        repo.update_plan(db, plan_id, status=status.value, finished_at=now_iso(), **fields)


@contextmanager
def plan_recorded(
    db_path: Path, key: str, spec_json: dict[str, Any]
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Keep the row of the plan with this key (PlanSpec.key(), spec_json PlanSpec.to_json())
    up to date around the block: running with this process's pid, each
    result the block hands to the yielded function stored at once (so a plan's searches show as
    they end; `plan_id` is added), done at the end; cancelled on SIGTERM or Ctrl-C, else failed
    with the error on one line (tuning.decide.search.record.ended)."""
    plan_id = _begin(db_path, key, spec_json)
    result: dict[str, Any] = {}

    def keep(found: dict[str, Any]) -> None:
        found["plan_id"] = plan_id
        result.update(found)
        with connect(db_path) as db:
            repo.update_plan(db, plan_id, result_json=result)

    with ended(lambda status, **fields: _end(db_path, plan_id, status, **fields)):
        yield keep
    _end(db_path, plan_id, Status.DONE, result_json=result)


def reap_plans(db_path: Path) -> list[int]:
    """Running plans whose process is gone: marked failed; their ids."""
    gone = []
    with connect(db_path) as db:
        for row in list_plans(db, active_only=True):
            if not search_alive(row):
                repo.update_plan(
                    db,
                    int(row["id"]),
                    status=Status.FAILED.value,
                    finished_at=now_iso(),
                    error="the plan's process stopped without finishing (died or was killed); "
                    "run the same `plan` command again to resume",
                )
                gone.append(int(row["id"]))
    return gone
