"""The runner's controls without an engine: cancel mid-run, the machine lock, a runner that died."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.clock import now_iso
from store import open_db, queries, repo
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.lock import RunnerBusy, machine_lock
from tuning.experiment.plan import plan_experiment, schedule
from tuning.experiment.runner import run_experiment
from tuning.experiment.supervisor import cancel_experiment, reap_stale
from tuning.workload import Workload


def test_schedule_interleaves_repeats() -> None:
    assert schedule([2, 16], 3) == [(2, 0), (16, 0), (2, 1), (16, 1), (2, 2), (16, 2)]


def test_cancel_stops_the_load_and_marks_the_run_cancelled(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=400, concurrency=2, input_len=4, output_len=50, num_warmups=0)
    with FakeOpenAIServer(FakeConfig(model="m", itl_ms=20.0)) as srv:
        exp_id = plan_experiment(
            db_path,
            param="concurrency",
            values=[2, 4],
            workload=wl,
            engine=None,
            base_url=srv.base_url,
            model="m",
        )
        result: dict[str, object] = {}
        worker = threading.Thread(target=lambda: result.update(ids=run_experiment(db_path, exp_id)))
        worker.start()
        db = open_db(db_path)
        deadline = time.monotonic() + 30
        while queries.get_experiment(db, exp_id)["phase"] != "loading":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)
        cancel_experiment(db_path, exp_id)
        worker.join(timeout=60)
        assert not worker.is_alive()
    exp = queries.get_experiment(db, exp_id)
    assert exp["status"] == "cancelled"
    runs = queries.list_runs(db, exp_id)
    assert len(runs) == 1 and runs[0]["status"] == "cancelled"  # the second value never started
    assert 0 < runs[0]["completed"] < 400


def test_one_experiment_at_a_time(lab_home: Path) -> None:
    with machine_lock(), pytest.raises(RunnerBusy), machine_lock():
        pass


def test_a_runner_that_died_is_noticed(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=4, concurrency=1, input_len=4, output_len=4)
    exp_id = plan_experiment(
        db_path,
        param="concurrency",
        values=[1],
        workload=wl,
        engine=None,
        base_url="http://127.0.0.1:9/v1",
        model="m",
    )
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
    wl = Workload(num_requests=4, concurrency=1, input_len=4, output_len=4)
    exp_id = plan_experiment(
        db_path,
        param="concurrency",
        values=[1],
        workload=wl,
        engine=None,
        base_url="http://127.0.0.1:9/v1",
        model="m",
    )
    db = open_db(db_path)
    repo.update_experiment(
        db,
        exp_id,
        status="running",
        runner_pid=__import__("os").getpid(),
        heartbeat_at=now_iso(),
    )
    assert reap_stale(db_path) == []
