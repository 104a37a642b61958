"""Issue 23 item 9: one answer to "what holds this machine", named by experiment (or search), lab DB
file and pid, whichever lab asks: the runner lock carries its holder, and this lab's rows count
while the lock is free (a search between its steps)."""

from __future__ import annotations

import os
from pathlib import Path

from core.records import NewExperiment
from store import connect, open_db, repo
from tuning.decide.background import busy_reason
from tuning.decide.holder import Holder, holder_line, machine_holder
from tuning.engine.procs import process_start_time
from tuning.experiment.lock import lock_holder, lock_path, machine_lock


def _other_lab(tmp_path: Path, name: str) -> tuple[Path, int]:
    other = tmp_path / "elsewhere" / "lab.db"
    with connect(other) as db:
        exp = repo.create_experiment(
            db, NewExperiment(param="max-num-seqs"), name=name, status="running"
        )
    return other.resolve(), exp


def test_the_lock_names_another_labs_experiment_with_its_db_and_pid(lab_home: Path) -> None:
    here = lab_home / "lab.db"
    open_db(here).conn.close()
    other, exp = _other_lab(lab_home.parent, "kv sweep")
    assert machine_holder(here) is None and lock_holder() is None
    with machine_lock(holder={"db": str(other), "experiment": exp}):
        record = lock_holder()
        holder = machine_holder(here)
        line = holder_line(here)
        reason = busy_reason(here)
    print(line)
    assert record == {"db": str(other), "experiment": exp, "pid": os.getpid()}
    assert holder == Holder("experiment", exp, "kv sweep", str(other), os.getpid())
    expected = f"experiment {exp} 'kv sweep' in {other}, pid {os.getpid()}"
    assert line == f"Running on this machine: {expected}"
    assert reason == f"{expected} is running; one at a time per machine"
    assert lock_holder() is None and machine_holder(here) is None  # released: nothing holds it


def test_a_search_step_holding_the_lock_is_named_as_its_search(lab_home: Path) -> None:
    other, exp = _other_lab(lab_home.parent, "search ab12: max-num-seqs = 4")
    me = os.getpid()
    with connect(other) as db:
        repo.create_search(
            db,
            key="ab12",
            param="max-num-seqs",
            spec_json={"param": "max-num-seqs"},
            status="running",
            runner_pid=me,
            runner_start_time_s=process_start_time(me),
        )
    with machine_lock(holder={"db": str(other), "experiment": exp}):
        holder = machine_holder(lab_home / "lab.db")
    assert holder is not None
    assert holder.line() == f"search 1 (max-num-seqs) in {other}, pid {me}"


def test_a_lock_without_a_record_or_with_an_unreadable_lab_is_still_named(lab_home: Path) -> None:
    lock_path().parent.mkdir(parents=True, exist_ok=True)
    with machine_lock(holder={"db": str(lab_home / "gone.db"), "experiment": 7}):
        gone = machine_holder(lab_home / "lab.db")
    assert gone is not None and gone.line() == (
        f"experiment 7 '?' in {lab_home / 'gone.db'}, pid {os.getpid()}"
    )
    with machine_lock():  # an older runner wrote only its pid
        bare = machine_holder(lab_home / "lab.db")
    assert bare is not None and bare.line() == (
        f"another runner (it did not say which lab), pid {os.getpid()}"
    )


def test_a_plans_step_holding_the_lock_is_named_by_the_plans_id(lab_home: Path) -> None:
    """A plan's confirm round is stored as 'plan <key>: confirm round 1 rival': the busy line
    (CLI refusals, Home, Live) names it by the plan's id, not its key."""
    other, exp = _other_lab(lab_home.parent, "plan 0123456789: confirm round 1 rival")
    with connect(other) as db:
        db["plans"].insert(
            {"key": "0123456789", "spec_json": "{}", "status": "running"}, alter=False
        )
        plan = int(db.execute("select max(id) from plans").fetchone()[0])
    with machine_lock(holder={"db": str(other), "experiment": exp}):
        reason = busy_reason(lab_home / "lab.db")
    assert f"experiment {exp} 'plan {plan}: confirm round 1 rival'" in reason, reason
    assert "0123456789" not in reason
