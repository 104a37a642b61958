"""Estimates that learn (issue 38, items 5 and 7): the estimate before start uses this machine's
own history of the engine and model (a run stored with other hardware ran elsewhere), each run's
whole window where it has an anatomy (the previous server's stop included), and the compile
cache: a configuration not started here yet is counted at the engine's cold start, the others
at its warm one; an experiment's own cold first starts do not make its later rounds look cold."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.records import NewExperiment
from store import connect, queries, repo
from tests.tuning.experiment.test_estimate import ENGINE, WL, seed, timed
from tuning.engine import hardware
from tuning.experiment.estimate import blend, engine_costs, experiment_line

HERE = hardware.hardware_details()["summary"]


def _startup(state: str) -> dict[str, object]:
    return {"anatomy": {"compile_cache": {"state": state}}}


def test_runs_of_another_machine_are_not_this_machines_history(fresh_db: Path) -> None:
    seed(fresh_db, ENGINE, [timed(0, 20, 30, 2, hardware=HERE), timed(60, 22, 30, 4)])
    seed(fresh_db, ENGINE, [timed(300, 300, 300, 300, hardware="1x NVIDIA H200")])
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
    assert costs.measured_runs == 2 and costs.start_s == pytest.approx(21.0)


def test_a_runs_whole_window_is_its_cost_where_it_has_an_anatomy(fresh_db: Path) -> None:
    """The stamps say 2 s of rest; the anatomy's window (the previous server's stop, begun
    before the run's row) says 12."""
    run = timed(0, 20, 30, 2, anatomy_json={"wall_s": 62.0, "parts": []})
    seed(fresh_db, ENGINE, [run])
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
    assert costs.rest_s == pytest.approx(12.0)


def test_each_configuration_not_compiled_here_yet_is_counted_cold_once(fresh_db: Path) -> None:
    """History: max-num-seqs 2 started here, cold (100 s) then warm (50 s). A new experiment of
    2 and 16: 16 has never started here, so one of its starts is counted cold."""
    history = [
        timed(0, 100, 30, 2, startup_json=_startup("miss"), config_json={"max-num-seqs": 2}),
        timed(200, 50, 30, 2, startup_json=_startup("hit"), config_json={"max-num-seqs": 2}),
    ]
    seed(fresh_db, ENGINE, history)
    with connect(fresh_db) as db:
        exp_id = repo.create_experiment(
            db,
            NewExperiment(
                param="max-num-seqs",
                values=(2, 16),
                repeats=2,
                engine=ENGINE,
                workload=WL.to_dict(),
            ),
        )
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
        est = experiment_line(db, exp_id)
    assert (costs.start_s, costs.cold_start_s) == pytest.approx((50.0, 100.0))
    warm_only = costs.experiment_s + 4 * costs.run_s()
    assert est.seconds == pytest.approx(warm_only + 50.0)  # one cold start: +50 s
    assert "start 50 s (100 s cold)" in est.line()
    assert "1 configuration not compiled here yet: its first start counted cold" in est.line()


def test_an_experiments_own_cold_starts_leave_its_later_rounds_warm(fresh_db: Path) -> None:
    history = [
        timed(0, 100, 30, 2, startup_json=_startup("miss")),
        timed(200, 50, 30, 2, startup_json=_startup("hit")),
    ]
    seed(fresh_db, ENGINE, history)
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
    own = [
        {**timed(500, 120, 30, 2), "compile_state": "miss"},
        {**timed(700, 118, 30, 2), "compile_state": "miss"},
    ]
    assert blend(costs, own).start_s == pytest.approx(50.0)  # not 119: the rest start warm
    own.append({**timed(900, 60, 30, 2), "compile_state": "hit"})
    assert blend(costs, own).start_s == pytest.approx(60.0)  # its own warm start says best
    with connect(fresh_db, readonly=True) as db:
        assert queries.list_runs(db)  # the seeded history is there


def test_a_malformed_anatomy_or_startup_cell_is_read_as_none(fresh_db: Path) -> None:
    """A hand-edited or hostile cell (not JSON, or a wall time no run takes) never breaks the
    estimate: the run counts by its stamps."""
    seed(fresh_db, ENGINE, [timed(0, 20, 30, 2), timed(60, 22, 30, 4)])
    with connect(fresh_db) as db:
        first, second = sorted(int(r["id"]) for r in queries.list_runs(db))  # rest 2 s, 4 s
        db.execute(
            "update runs set anatomy_json = 'not json', startup_json = '{' where id = ?", [first]
        )
        repo.update_run(db, second, anatomy_json={"wall_s": 1e12})
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
    # the first by its stamps (2 s of rest); the second's impossible wall time left out, said
    assert costs.measured_runs == 2 and costs.rest_s == pytest.approx(2.0)
    assert f"run {second}'s wall time" in costs.ignored
