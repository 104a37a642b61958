"""What holds the machine, named the same way whatever moment it is asked: a search whose step
is running is the search (a page test once read "experiment 1 is running" or "search 1 ..."
depending on whether its first step had started)."""

from __future__ import annotations

import os
from pathlib import Path

from core.records import NewExperiment
from store import connect, repo
from tuning.decide.background import busy_reason
from tuning.engine.procs import process_start_time


def test_a_running_search_is_named_even_while_one_of_its_steps_runs(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    me, started = os.getpid(), process_start_time(os.getpid())
    with connect(db_path) as db:
        exp = repo.create_experiment(
            db,
            NewExperiment(param="max-num-seqs"),
            name="search ab12: max-num-seqs = 2",
            values_json=[2],
            status="running",
            runner_pid=me,
            runner_start_time_s=started,
        )
    where = f"in {db_path.resolve()}, pid {me}"
    assert busy_reason(db_path) == (
        f"experiment {exp} 'search ab12: max-num-seqs = 2' {where} is running; "
        "one at a time per machine"
    )
    with connect(db_path) as db:
        repo.create_search(
            db,
            key="ab12",
            param="max-num-seqs",
            spec_json={"param": "max-num-seqs"},
            status="running",
            runner_pid=me,
            runner_start_time_s=started,
        )
    assert busy_reason(db_path) == (
        f"search 1 (max-num-seqs) {where} is running; one at a time per machine"
    )
