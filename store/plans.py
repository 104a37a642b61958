"""Reads of the tuning plans' rows (schema m013_plans; written by store.repo.create_plan and
update_plan for tuning.decide.search.plan_record): none in a lab that predates them."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from core.status import ACTIVE
from store.db import StoreError
from store.queries import decode


def get_plan(db: Database, plan_id: int) -> dict[str, Any]:
    """The plan's row, its JSON parsed (StoreError: no such plan)."""
    rows = (
        list(db.query("select * from plans where id = ?", [plan_id]))
        if "plans" in db.table_names()
        else []
    )
    if not rows:
        raise StoreError(f"no plan {plan_id}")
    return decode(rows[0]) or {}


def list_plans(db: Database, active_only: bool = False) -> list[dict[str, Any]]:
    """Plans, newest first (only the running ones with active_only)."""
    if "plans" not in db.table_names():
        return []
    where, params = "", []
    if active_only:
        where, params = f"where status in ({','.join('?' * len(ACTIVE))})", sorted(ACTIVE)
    return [
        decode(r) or {} for r in db.query(f"select * from plans {where} order by id desc", params)
    ]


def plan_id_for_key(db: Database, key: str) -> int | None:
    """The newest plan row with this key (a resumed plan reuses it), None when there is none."""
    if "plans" not in db.table_names():
        return None
    row = db.execute(
        "select id from plans where key = ? order by id desc limit 1", [key]
    ).fetchone()
    return None if row is None else int(row[0])
