"""The runner seen from outside: start it as its own process, ask it to stop, and clean up after
one that died. Pages and the CLI call these; the runner itself never does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from core.clock import age_s, now_iso
from core.status import Status, is_active
from store import connect, queries, repo
from tuning.procs import pid_alive, stop_group
from tuning.settings import REPO_ROOT, lab_home

# A runner beats every 2 s; ten missed beats and a gone pid mean it died.
STALE_AFTER_S = 20.0
# What a dead runner's experiment and unfinished runs become (the phase says it too).
FAILED = {"status": Status.FAILED, "phase": Status.FAILED}


def spawn_runner(db_path: str | Path, experiment_id: int) -> int:
    """Start `python -m tuning run-experiment` in its own session; the page returns at once."""
    log_dir = lab_home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "tuning", "run-experiment"]
    argv += ["--db", str(db_path), "--id", str(experiment_id)]
    with open(log_dir / f"runner-{experiment_id}.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO_ROOT),
        )
    with connect(db_path) as db:
        repo.update_experiment(db, experiment_id, runner_pid=proc.pid, heartbeat_at=now_iso())
    return proc.pid


def cancel_experiment(db_path: str | Path, experiment_id: int) -> None:
    """Ask the runner to stop; it stops the server and marks the run cancelled."""
    with connect(db_path) as db:
        repo.request_cancel(db, experiment_id)


def reap_stale(db_path: str | Path) -> list[int]:
    """Experiments whose runner stopped beating: mark them failed and stop what they left."""
    reaped = []
    with connect(db_path) as db:
        for exp in queries.active_experiments(db):
            if _runner_died(exp):
                _fail_orphan_runs(db, int(exp["id"]))
                error = "runner stopped beating (died or was killed)"
                repo.update_experiment(db, int(exp["id"]), **FAILED, error=error)
                reaped.append(int(exp["id"]))
    return reaped


def _runner_died(exp: dict[str, Any]) -> bool:
    """A queued experiment with no runner yet is waiting, not dead."""
    pid = int(exp.get("runner_pid") or 0)
    if exp["status"] == Status.QUEUED and not pid:
        return False
    age = age_s(exp.get("heartbeat_at") or exp.get("created_at"))
    return age > STALE_AFTER_S and not pid_alive(pid)


def _fail_orphan_runs(db: Database, experiment_id: int) -> None:
    """Stop the server a dead runner left behind and say so on each of its unfinished runs."""
    for run in queries.list_runs(db, experiment_id, include_hidden=True):
        if not is_active(run["status"]):
            continue
        server_pid = int(run.get("server_pid") or 0)
        if pid_alive(server_pid):
            stop_group(server_pid)
        repo.update_run(
            db,
            int(run["id"]),
            **FAILED,
            failure_kind="runner_died",
            failure_hint="The runner process stopped without finishing; "
            "its log is under data/logs/.",
        )
