"""Reaping: a runner that died is noticed (its experiment and run marked failed), a live one is
left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.clock import now_iso
from store import open_db, queries, repo
from tests.factories import plan_attached
from tuning.experiment.supervisor import reap_stale


def test_a_runner_that_died_is_noticed(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    exp_id = plan_attached(db_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = open_db(db_path)
    run_id = repo.create_run(
        db, experiment_id=exp_id, seq=0, param="concurrency", value="1", status="running"
    )
    repo.update_experiment(
        db, exp_id, status="running", runner_pid=dead.pid, heartbeat_at="2026-01-01T00:00:00+00:00"
    )
    assert reap_stale(db_path) == [exp_id]
    assert queries.get_experiment(db, exp_id)["status"] == "failed"
    assert queries.get_run(db, run_id)["failure_kind"] == "runner_died"
    assert reap_stale(db_path) == []


def test_a_live_runner_is_left_alone(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    exp_id = plan_attached(db_path)
    db = open_db(db_path)
    repo.update_experiment(
        db, exp_id, status="running", runner_pid=os.getpid(), heartbeat_at=now_iso()
    )
    assert reap_stale(db_path) == []
