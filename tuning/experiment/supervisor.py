"""The runner seen from outside: start it as its own process, ask it to stop, resume what it left,
and clean up after one that died. Pages and the CLI call these; the runner itself never does.

A stored pid is acted on only when its process is still the one the lab started: the runner's and
each server's start time is stored beside its pid (`tuning.engine.procs.same_process`), so a pid the
kernel has since given to someone else is never signalled, and its runner counts as dead.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from core.clock import age_s, now_iso
from core.status import Status, is_active
from store import connect, queries, repo
from tuning.engine import ipc_dir
from tuning.engine.procs import pid_alive, process_start_time, same_process, stop_group
from tuning.experiment.order import counterbalanced
from tuning.experiment.outcome import remaining
from tuning.settings import REPO_ROOT, lab_home

# A runner beats every 2 s; ten missed beats and a gone pid mean it died (rows without a stored
# start time, written by an older lab; with one, a gone or replaced process is enough).
STALE_AFTER_S = 20.0
# What a dead runner's experiment and unfinished runs become (the phase says it too).
FAILED = {"status": Status.FAILED, "phase": Status.FAILED}


class ResumeRefused(ValueError):
    """The experiment cannot be resumed (still running, imported, unknown); the message says why."""


@dataclass
class Reaped:
    """One experiment whose runner was found dead, and what was done about it."""

    experiment_id: int
    runner_pid: int
    runs: list[int] = field(default_factory=list)  # marked failed (runner_died)
    servers_stopped: list[int] = field(default_factory=list)  # pids, verified ours first
    servers_left: list[int] = field(default_factory=list)  # alive but not provably ours


def spawn_runner(db_path: str | Path, experiment_id: int) -> int:
    """Start `python -m tuning run-experiment` in its own session; the page returns at once."""
    reap(db_path)
    log_dir = lab_home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "tuning", "run-experiment"]
    argv += ["--db", str(db_path), "--experiment", str(experiment_id)]
    with connect(db_path) as db:  # named by uid: another DB's experiment 1 has its own log
        uid = queries.get_experiment(db, experiment_id)["uid"]
    proc = spawn_detached(argv, log_dir / f"runner-{uid}.log")
    with connect(db_path) as db:
        repo.update_experiment(
            db,
            experiment_id,
            runner_pid=proc.pid,
            runner_start_time_s=process_start_time(proc.pid),
            heartbeat_at=now_iso(),
        )
    return proc.pid


def spawn_detached(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """A lab process in its own session (it outlives the page that started it), from the repo,
    its output appended to `log_path`."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO_ROOT),
        )


def cancel_experiment(db_path: str | Path, experiment_id: int) -> None:
    """Ask the runner to stop; it stops the server and marks the run cancelled."""
    reap(db_path)
    with connect(db_path) as db:
        repo.request_cancel(db, experiment_id)


def reap_stale(db_path: str | Path) -> list[int]:
    """Experiments whose runner died: marked failed, what they left stopped; their ids."""
    return [r.experiment_id for r in reap(db_path)]


def reap(db_path: str | Path) -> list[Reaped]:
    """Every active experiment whose runner is gone (or whose pid now belongs to another process):
    its unfinished runs and itself marked failed, and each server it left stopped if (and only
    if) that server is provably the one the lab started."""
    reaped = []
    with connect(db_path) as db:
        for exp in queries.active_experiments(db):
            if runner_died(exp):
                item = Reaped(int(exp["id"]), int(exp.get("runner_pid") or 0))
                _fail_orphan_runs(db, item)
                _stop_asleep(exp, item)
                error = "runner stopped beating (died or was killed)"
                repo.update_experiment(
                    db, item.experiment_id, **FAILED, error=error, finished_at=now_iso()
                )
                reaped.append(item)
    return reaped


def runner_died(exp: dict[str, Any]) -> bool:
    """A queued experiment with no runner yet is waiting, not dead."""
    pid = int(exp.get("runner_pid") or 0)
    if exp["status"] == Status.QUEUED and not pid:
        return False
    started = exp.get("runner_start_time_s")
    if started:
        return not same_process(pid, float(started))
    age = age_s(exp.get("heartbeat_at") or exp.get("created_at"))
    return age > STALE_AFTER_S and not pid_alive(pid)


def _fail_orphan_runs(db: Database, item: Reaped) -> None:
    """Stop the server a dead runner left behind and say so on each of its unfinished runs."""
    for run in queries.list_runs(db, item.experiment_id, include_hidden=True):
        if not is_active(run["status"]):
            continue
        server_pid = int(run.get("server_pid") or 0)
        started = run.get("server_start_time_s")
        if started and same_process(server_pid, float(started)):
            folder = ipc_dir.folder_of(server_pid)
            stop_group(server_pid)  # its own session: the group id is its pid
            ipc_dir.remove(folder)
            item.servers_stopped.append(server_pid)
        elif pid_alive(server_pid):  # no start time stored, or the pid is someone else's now
            item.servers_left.append(server_pid)
        repo.update_run(
            db,
            int(run["id"]),
            **FAILED,
            finished_at=now_iso(),
            failure_kind="runner_died",
            failure_hint="The runner process stopped without finishing; "
            "its log is under data/logs/. `tuning-lab experiment --resume "
            f"{item.experiment_id}` runs what is left.",
        )
        item.runs.append(int(run["id"]))


def _stop_asleep(exp: dict[str, Any], item: Reaped) -> None:
    """Stop the resident servers a dead runner left asleep (tuning.experiment.resident), each
    only when it is provably the process the lab started."""
    resident = exp.get("resident")
    asleep = resident.get("asleep") if isinstance(resident, dict) else None
    for entry in asleep if isinstance(asleep, list) else ():
        if not isinstance(entry, dict):
            continue
        pid, started = entry.get("pid"), entry.get("start_time_s")
        if not isinstance(pid, int) or not isinstance(started, int | float):
            continue
        if same_process(pid, float(started)):
            folder = ipc_dir.folder_of(pid)
            stop_group(pid)
            ipc_dir.remove(folder)
            item.servers_stopped.append(pid)
        elif pid_alive(pid):
            item.servers_left.append(pid)


def settle(db_path: str | Path, experiment_id: int, status: Status, error: str) -> None:
    """An experiment still `queued` when its would-be runner gave up (refused, interrupted before
    it began) gets a terminal status instead of waiting for ever."""
    with connect(db_path) as db:
        exp = queries.get_experiment(db, experiment_id)
        if exp["status"] == Status.QUEUED:
            repo.update_experiment(
                db, experiment_id, status=status, phase=status, error=error, finished_at=now_iso()
            )


def prepare_resume(db_path: str | Path, experiment_id: int) -> int:
    """Queue a stopped experiment again; returns how many (value, repeat) pairs are left to run
    (0: nothing to do, the experiment is left as it is). The runs already finished are kept."""
    reap(db_path)
    with connect(db_path) as db:
        exp = queries.get_experiment(db, experiment_id)
        _refuse_unresumable(exp)
        plan = counterbalanced(list(exp["values"] or []), int(exp["repeats"] or 1))
        runs = queries.list_runs(db, experiment_id, include_hidden=True)
        left = len(remaining(plan, runs)) or _rounds_left(db, exp, runs)
        if left:
            repo.update_experiment(
                db,
                experiment_id,
                status=Status.QUEUED,
                phase="queued",
                cancel_requested=0,
                error=None,
                finished_at=None,
                runner_pid=None,
                runner_start_time_s=None,
            )
        return left


def _refuse_unresumable(exp: dict[str, Any]) -> None:
    """ResumeRefused for an experiment that is running or was imported."""
    if is_active(exp["status"]):
        raise ResumeRefused(
            f"experiment {exp['id']} is {exp['status']} (runner pid "
            f"{exp.get('runner_pid')}); stop it first"
        )
    if (exp.get("origin") or "local") != "local":
        raise ResumeRefused(f"experiment {exp['id']} was imported: it is read-only here")


def _rounds_left(db: Database, exp: dict[str, Any], runs: list[dict[str, Any]]) -> int:
    """The runs a repeat-until-decided experiment would still add (0 for any other): its stopping
    rule asked again, with the limits as stored now (`raise_limits`)."""
    from tuning.compare.primaries import Primaries
    from tuning.engine.params import ParamError
    from tuning.experiment.estimate import costs_of, restarts
    from tuning.experiment.repeats import AutoRepeats, plan_for

    settings = AutoRepeats.of(exp)
    if settings is None:
        return 0
    values = list(exp["values"] or [])
    costs = costs_of(db, exp)
    try:
        restart = restarts(exp)
    except ParamError:  # a flag learned from an engine whose flags are not cached here
        restart = True
    plan = plan_for(values, runs, settings, costs, restart, Primaries.of(exp))
    return 0 if plan.stop else plan.runs


def raise_limits(
    db_path: str | Path, experiment_id: int, max_repeats: int | None, budget_minutes: float | None
) -> None:
    """New limits for a repeat-until-decided experiment that stopped on its budget or its
    max_repeats, before `prepare_resume`: the budget is the whole experiment's (its runs so far
    count), so only a larger one buys more rounds. An experiment of fixed repeats left undecided
    goes on until decided under these limits: from then on its decision is the sequential
    rule's over all its runs (tuning.experiment.decision), as if it had repeated until decided
    from the start."""
    from tuning.experiment.repeats import AutoRepeats
    from tuning.experiment.size import DEFAULT_MAX_REPEATS

    with connect(db_path) as db:
        exp = queries.get_experiment(db, experiment_id)
        _refuse_unresumable(exp)  # a running runner keeps the limits it read
        stored = AutoRepeats.of(exp)
        if stored is None:  # fixed repeats: from now on, until decided
            at_least = max(DEFAULT_MAX_REPEATS, int(exp.get("repeats") or 1))
            stored = AutoRepeats(max_repeats=at_least)
        new = AutoRepeats(
            max_repeats=stored.max_repeats if max_repeats is None else max_repeats,
            budget_minutes=stored.budget_minutes if budget_minutes is None else budget_minutes,
        )
        repo.update_experiment(db, experiment_id, **new.columns())
