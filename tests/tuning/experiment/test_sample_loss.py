"""Issue 39, item 6, through the lab's own runner on the fake vLLM: a run whose samples the DB
refused (locked, full) was stored with peaks taken from the rows that got through and nothing to
say so; now the run stores what its series lack, and Runs, Compare and `runs` flag it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import store.repo
from store import connect, queries
from tests.fakes.engines import fake_spec
from tuning.cli.runs import run_as_dict
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload
from ui.health import health_badge, health_problems

QUICK = {"num_requests": 4, "concurrency": 2, "input_len": 8, "output_len": 8, "num_warmups": 0}


def one_run(home: Path) -> dict[str, Any]:
    """An experiment of one value on the fake vLLM, run by the lab's runner; its run as stored."""
    db_path = home / "lab.db"
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4], workload=Workload(**QUICK), engine=fake_spec()
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=30)
    with connect(db_path, readonly=True) as db:
        (run,) = queries.list_runs(db, exp_id)
    return run


def test_a_run_whose_samples_the_db_refused_is_stored_flagged(
    no_leftovers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def locked(db: Any, run_id: int, rows: Any) -> int:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store.repo, "insert_samples", locked)  # the samplers' writes only
    run = one_run(no_leftovers)
    assert run["status"] == "done" and run["completed"] == 4  # measured all the same
    samples = run["health"]["samples"]
    assert samples["complete"] is False
    lost = samples["lost_rows"]
    assert lost["tree_rss_bytes"] >= 1 and lost.get("num_requests_running", 0) >= 1, samples
    assert run["peak_tree_rss_bytes"] is None  # no row of it reached the DB: no peak invented
    problems = health_problems(run)
    assert any(p.startswith("memory series incomplete: ") for p in problems), problems
    assert "memory series incomplete" in health_badge(run)  # the Runs table's badge
    gaps = run_as_dict(run)["sample_gaps"]
    assert gaps[0].startswith(f"memory series incomplete: {lost['tree_rss_bytes']:,} of its")


def test_a_run_whose_samples_were_all_stored_says_so(no_leftovers: Path) -> None:
    run = one_run(no_leftovers)
    samples = run["health"]["samples"]
    assert samples["lost_rows"] == {} and samples["ticks"]["process_tree"]["taken"] >= 1
    assert run["peak_tree_rss_bytes"] and not any("incomplete" in p for p in health_problems(run))
