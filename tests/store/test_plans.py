"""A tuning plan's row (m013_plans, store.plans, store.repo.create_plan / update_plan): the
migration makes the table, a row is written and updated with its JSON, read back newest first,
found again by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import StoreError, connect, repo
from store.queries import get_plan, list_plans, plan_id_for_key
from store.schema import PLAN_COLUMNS
from store.schema_version import known_migrations


def test_the_migration_makes_the_plans_table(fresh_db: Path) -> None:
    assert "m013_plans" in known_migrations()  # later steps may follow it
    with connect(fresh_db, readonly=True) as db:
        assert "plans" in db.table_names()
        assert set(db.table("plans").columns_dict) == set(PLAN_COLUMNS)
        assert list_plans(db) == [] and plan_id_for_key(db, "abc") is None


def test_a_plan_row_is_written_updated_and_found_by_its_key(fresh_db: Path) -> None:
    with connect(fresh_db) as db:
        first = repo.create_plan(db, key="k1", spec_json={"params": ["max-num-seqs"]})
        second = repo.create_plan(db, key="k2", spec_json={"params": ["block-size"]})
        repo.update_plan(db, first, status="done", result_json={"chosen": {"max-num-seqs": 8}})
    with connect(fresh_db, readonly=True) as db:
        row = get_plan(db, first)
        assert row["status"] == "done" and row["result"] == {"chosen": {"max-num-seqs": 8}}
        assert row["spec"] == {"params": ["max-num-seqs"]} and len(row["uid"]) == 32
        assert [r["id"] for r in list_plans(db)] == [second, first]  # newest first
        assert [r["id"] for r in list_plans(db, active_only=True)] == [second]  # queued
        assert plan_id_for_key(db, "k1") == first and plan_id_for_key(db, "k3") is None
        with pytest.raises(StoreError, match="no plan 99"):
            get_plan(db, 99)
