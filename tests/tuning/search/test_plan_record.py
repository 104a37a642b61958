"""A plan's row (tuning.decide.search.plan_record): written running (this process) when the plan
starts, each result handed over stored at once, done at the end; failed with the error on one
line, cancelled on Ctrl-C / SIGTERM; a resumed plan (same key) reuses its row; reaped failed
when its process is gone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from store import connect, repo
from store.queries import get_plan, list_plans
from tuning.decide.search.plan import PlanSpec
from tuning.decide.search.plan_record import plan_recorded, reap_plans
from tuning.decide.search.strategy import Space
from tuning.experiment.exits import Interrupted
from tuning.measure.traffic.workload import Workload


def plan_spec(hi: int = 8) -> PlanSpec:
    return PlanSpec(
        params=["max-num-seqs", "concurrency"],
        spaces={"max-num-seqs": Space(1, hi, True), "concurrency": Space(1, 16, True)},
        objective="output_throughput",
        workload=Workload(num_requests=4, concurrency=2, input_len=4, output_len=3),
        engine=None,
        slo_ms={"ttft": 500.0},
        base_url="http://127.0.0.1:9",
        model="m",
    )


def _recorded(db_path: Path, spec: PlanSpec) -> Any:
    return plan_recorded(db_path, spec.key(), spec.to_json())


def _row(db_path: Path, plan_id: int) -> dict[str, Any]:
    with connect(db_path, readonly=True) as db:
        return get_plan(db, plan_id)


def test_the_row_is_written_at_the_start_and_updated_at_the_end(fresh_db: Path) -> None:
    spec = plan_spec()
    with _recorded(fresh_db, spec) as keep:
        with connect(fresh_db, readonly=True) as db:
            (row,) = list_plans(db)
        assert row["status"] == "running" and row["runner_pid"] == os.getpid()
        assert row["key"] == spec.key() and row["spec"]["params"] == spec.params
        assert row["spec"]["ranges"]["concurrency"] == [1.0, 16.0, True]
        assert row["finished_at"] is None and row["host"]
        keep({"searches": [{"param": "max-num-seqs", "chosen": 8}]})
        assert _row(fresh_db, row["id"])["result"]["searches"][0]["chosen"] == 8  # at once
        found = {"recommended": {"max-num-seqs": 8}}
        keep(found)
    assert found["plan_id"] == row["id"]
    done = _row(fresh_db, row["id"])
    assert done["status"] == "done" and done["finished_at"] and done["error"] is None
    assert done["result"]["recommended"] == {"max-num-seqs": 8}
    assert done["result"]["searches"][0]["chosen"] == 8 and done["result"]["plan_id"] == row["id"]


def test_a_resumed_plan_reuses_its_row_and_another_plan_gets_its_own(fresh_db: Path) -> None:
    with pytest.raises(RuntimeError), _recorded(fresh_db, plan_spec()):
        raise RuntimeError("the engine\nwent away")
    with connect(fresh_db, readonly=True) as db:
        (failed,) = list_plans(db)
    assert failed["status"] == "failed"
    assert failed["error"] == "RuntimeError: the engine went away"  # one line
    with _recorded(fresh_db, plan_spec()) as keep:  # the same arguments: a resume
        keep({"gain": {"verdict": "undecided"}})
    resumed = _row(fresh_db, failed["id"])
    assert resumed["status"] == "done" and resumed["error"] is None
    with _recorded(fresh_db, plan_spec(hi=16)) as keep:  # another range: another plan
        keep({})
    with connect(fresh_db, readonly=True) as db:
        assert len(list_plans(db)) == 2


def test_an_interrupted_plan_is_cancelled_and_a_dead_one_reaped(fresh_db: Path) -> None:
    with pytest.raises(Interrupted), _recorded(fresh_db, plan_spec()):
        raise Interrupted()
    with connect(fresh_db, readonly=True) as db:
        (row,) = list_plans(db)
    assert row["status"] == "cancelled" and row["error"] == "interrupted by SIGTERM"
    with connect(fresh_db) as db:  # a plan whose process is gone (no such start time)
        gone = repo.create_plan(
            db,
            key="x",
            spec_json={},
            status="running",
            runner_pid=os.getpid(),
            runner_start_time_s=1.0,
        )
    assert reap_plans(fresh_db) == [gone]
    assert _row(fresh_db, gone)["status"] == "failed"
    assert "run the same `plan` command again" in _row(fresh_db, gone)["error"]
    assert reap_plans(fresh_db) == []
