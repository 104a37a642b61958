"""Issue 22, Trust: the reaper runs from every command and page that shows status. A run whose
runner was SIGKILLed read `running` in `runs`, Compare, History and Live (only Home reaped); now
each of them marks it failed first, and a lab with nothing to reap is not written to."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from store import connect, queries, repo
from store.queries import list_plans
from tests.factories import plan_attached
from tuning.decide.reaper import reap_dead
from tuning.engine.procs import process_start_time

Cli = Callable[..., subprocess.CompletedProcess[str]]


def killed_runner_experiment(db_path: Path) -> tuple[int, int]:
    """An experiment `running` with a run `running`, whose runner process was SIGKILLed."""
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = process_start_time(runner.pid)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    exp_id = plan_attached(db_path, "concurrency", [1, 2])
    with connect(db_path) as db:
        run_id = repo.create_run(
            db, experiment_id=exp_id, seq=0, param="concurrency", value="1", status="running"
        )
        repo.update_experiment(
            db, exp_id, status="running", runner_pid=runner.pid, runner_start_time_s=started
        )
    return exp_id, run_id


def _stored(db_path: Path, exp_id: int, run_id: int) -> tuple[str, str]:
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        return str(exp["status"]), str(queries.get_run(db, run_id)["status"])


def test_runs_shows_a_sigkilled_run_failed_and_stores_it(lab_home: Path, tuning_cli: Cli) -> None:
    db_path = lab_home / "lab.db"
    exp_id, run_id = killed_runner_experiment(db_path)
    out = tuning_cli(["runs", "--json", "--db", str(db_path)], lab_home, timeout=120)
    assert out.returncode == 0, out.stderr
    shown = {r["id"]: r["status"] for r in json.loads(out.stdout)}
    assert shown[run_id] == "failed"
    assert f"reaped experiment {exp_id}" in out.stderr
    assert _stored(db_path, exp_id, run_id) == ("failed", "failed")


def test_nothing_to_reap_writes_nothing(lab_home: Path, tuning_cli: Cli) -> None:
    db_path = lab_home / "lab.db"
    plan_attached(db_path)
    with connect(db_path):  # a writer's close leaves no -wal behind
        pass
    sha = hashlib.sha256(db_path.read_bytes()).hexdigest()
    assert reap_dead(db_path) == [] and reap_dead(lab_home / "missing.db") == []
    out = tuning_cli(["runs", "--db", str(db_path)], lab_home, timeout=120)
    assert out.returncode == 0 and "reaped" not in out.stderr, out.stderr
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == sha


def test_plan_show_and_every_status_command_reap_a_dead_plan(
    lab_home: Path, tuning_cli: Cli
) -> None:
    """A plan whose process was SIGKILLed is marked failed by `runs` too (the shared reaper), not
    only by `plan show`."""
    db_path = lab_home / "lab.db"
    plan_attached(db_path)
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = process_start_time(runner.pid)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    with connect(db_path) as db:
        plan_id = repo.create_plan(
            db,
            key="k",
            spec_json={},
            status="running",
            runner_pid=runner.pid,
            runner_start_time_s=started,
        )
    out = tuning_cli(["runs", "--db", str(db_path)], lab_home, timeout=120)
    assert out.returncode == 0, out.stderr
    with connect(db_path, readonly=True) as db:
        (row,) = [p for p in list_plans(db) if int(p["id"]) == plan_id]
    assert row["status"] == "failed" and "run the same `plan` command again" in row["error"]
