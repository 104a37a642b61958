"""A search's row (tuning.decide.search.record): written around `run_search` (done with its result,
cancelled on SIGTERM or Ctrl-C, failed on an error), reaped when its process is gone, and read
back as progress: the decision log and the chosen value with the verdicts' interval over every
finished run of that value."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from store import connect, queries, repo
from tests.factories import add_experiment, add_run
from tuning.compare.stats import mean_interval
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.record import progress, reap_searches, recorded, spec_json, step_prefix
from tuning.decide.search.strategy import Space
from tuning.experiment.exits import Interrupted
from tuning.measure.traffic.workload import Workload

# max-num-seqs -> output tok/s of each of its runs: 4 is best, measured twice.
TPUT = {2: [100.0], 4: [150.0, 154.0], 8: [120.0]}


def _spec() -> SearchSpec:
    return SearchSpec(
        param="max-num-seqs",
        space=Space(2, 8, True),
        objective="output_throughput",
        workload=Workload(num_requests=4, concurrency=2, input_len=4, output_len=3),
        engine=None,
        budget_runs=4,
    )


def _row(db_path: Path, search_id: int) -> dict:
    with connect(db_path, readonly=True) as db:
        return queries.get_search(db, search_id)


def test_progress_reads_the_log_and_the_chosen_value_with_its_interval(fresh_db: Path) -> None:
    spec, key = _spec(), "abc123"
    rng = np.random.default_rng(1)
    with connect(fresh_db) as db:
        sid = repo.create_search(
            db, key=key, param=spec.param, spec_json=spec_json(spec), status="done"
        )
        for step, (value, tputs) in enumerate(TPUT.items()):
            name = f"{step_prefix(key)} max-num-seqs = {value}"
            exp = add_experiment(db, values=[value], name=name, notes=f"why {step + 1}")
            for rep, tput in enumerate(tputs):
                rid = add_run(db, exp, seq=rep, value=value, rng=rng, repeat=rep)
                repo.update_run(db, rid, output_throughput=tput)
        other = add_experiment(db, values=[4], name="max-num-seqs = 4, not this search")
        add_run(db, other, seq=0, value=4, rng=rng)
    done = progress(fresh_db, _row(fresh_db, sid))
    assert [e["value"] for e in done.log] == [2.0, 4.0, 8.0]
    assert [e["why"] for e in done.log] == ["why 1", "why 2", "why 3"]
    assert done.chosen == 4.0 and len(done.chosen_runs) == 2
    assert done.chosen_mean == pytest.approx(152.0)
    assert done.interval == mean_interval(TPUT[4])  # the verdicts' rule over both runs
    assert done.interval is not None and done.interval[0] < 152.0 < done.interval[1]
    assert not done.active


def test_recorded_writes_the_end_of_a_search(fresh_db: Path) -> None:
    spec = _spec()
    with recorded(fresh_db, spec) as keep:
        row = _row(fresh_db, 1)
        assert row["status"] == "running" and row["runner_pid"] == os.getpid()
        assert row["key"] == spec.key() and row["spec"]["range"] == [2.0, 8.0]
        found = {"chosen": 4, "runs": [1, 2]}
        keep(found)
    assert found["search_id"] == 1  # the result names its search's row (what --json prints)
    row = _row(fresh_db, 1)
    assert row["status"] == "done" and row["result"] == {
        "chosen": 4,
        "runs": [1, 2],
        "search_id": 1,
    }
    with pytest.raises(Interrupted), recorded(fresh_db, spec):
        raise Interrupted()
    assert _row(fresh_db, 2)["status"] == "cancelled" and "SIGTERM" in _row(fresh_db, 2)["error"]
    with pytest.raises(RuntimeError), recorded(fresh_db, spec, search_id=2):
        raise RuntimeError("engine gone")
    row = _row(fresh_db, 2)  # the UI's row, taken over by the process it started
    assert row["status"] == "failed" and "engine gone" in row["error"]


def test_a_search_whose_process_is_gone_is_reaped(fresh_db: Path) -> None:
    with connect(fresh_db) as db:
        gone = repo.create_search(
            db,
            key="k",
            param="max-num-seqs",
            spec_json=spec_json(_spec()),
            status="running",
            runner_pid=os.getpid(),
            runner_start_time_s=1.0,  # not this process's start: another process with its pid
        )
        waiting = repo.create_search(
            db, key="k2", param="max-num-seqs", spec_json=spec_json(_spec())
        )
    assert reap_searches(fresh_db) == [gone]
    assert _row(fresh_db, gone)["status"] == "failed"
    assert _row(fresh_db, waiting)["status"] == "queued"  # being started: no pid yet
