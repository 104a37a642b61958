"""Issue 25, item 2: the estimate model. With no run of the engine it says it guesses (and from
what); with earlier runs of the same engine (only those) it takes their start, load and rest;
auto repeats get their first rounds and their most; the budget of `--repeats auto` asks the same
model whether a round fits; the time left counts this experiment's own finished runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.records import NewExperiment
from store import connect, queries, repo
from tuning.experiment.estimate import (
    GUESSES,
    about,
    blend,
    costs_from,
    engine_costs,
    experiment_line,
    for_experiment,
    for_plan,
    for_search,
    seconds_left,
)
from tuning.experiment.repeats import AutoRepeats, plan_for
from tuning.measure.traffic.workload import Workload

WL = Workload(num_requests=40, concurrency=4, input_len=8, output_len=10, num_warmups=0)
ENGINE = {
    "name": "custom",
    "command": ["python", "fake_vllm.py"],
    "model": "m",
    "served_model_name": "m",
    "backend": "gpu",
}
OTHER = {**ENGINE, "command": ["python", "other_vllm.py"]}
T0 = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def timed(t: float, start: float | None, load: float, rest: float, **extra: Any) -> dict[str, Any]:
    """A measured run row from t: `start` s to healthy, `load` s of load (400 tokens), `rest`."""
    wall = (start or 0.0) + load + rest
    return {
        "status": "done",
        "started_at": at(t),
        "finished_at": at(t + wall),
        "time_to_healthy_s": start,
        "duration": load,
        "total_output_tokens": 400,
        **extra,
    }


def seed(path: Path, engine: dict[str, Any], runs: list[dict[str, Any]], **exp: Any) -> int:
    """One experiment of `engine` with these runs; started 2 s before the first run, ended 3 s
    after the last (the runner's start and the last stop)."""
    with connect(path) as db:
        first, last = runs[0]["started_at"], runs[-1]["finished_at"]
        start = (datetime.fromisoformat(first) - timedelta(seconds=2)).isoformat()
        end = (datetime.fromisoformat(last) + timedelta(seconds=3)).isoformat() if last else None
        exp_id = repo.create_experiment(
            db,
            NewExperiment(param="max-num-seqs"),
            uid=repo.new_uid(),
            values_json=[2, 16],
            repeats=3,
            engine_json=engine,
            workload_json=WL.to_dict(),
            status=exp.pop("status", "done"),
            started_at=start,
            finished_at=end,
            **exp,
        )
        for seq, run in enumerate(runs):
            repo.create_run(db, uid=repo.new_uid(), experiment_id=exp_id, seq=seq, value="2", **run)
    return exp_id


def test_no_history_is_a_stated_guess_per_engine_kind() -> None:
    costs = costs_from([], [], WL, "embedded-cpu")
    guess = GUESSES["embedded-cpu"]
    assert costs.start_s == guess.start_s == 40.0 and costs.measured_runs == 0
    assert costs.load_s == pytest.approx(400 / guess.output_tok_s)  # 40 requests x 10 tokens
    est = for_experiment(costs, 2, 3)
    assert est.runs == 6
    assert est.seconds == pytest.approx(costs.experiment_s + 6 * costs.run_s())
    line = est.line()
    print(line)
    assert line.startswith("estimate: 6 runs, about ")
    assert "no runs of this engine yet: a guess" in line and "engine-cpu-measured.md" in line
    # warm-ups (one wave of `concurrency` by default) are guessed into the rest
    warm = costs_from([], [], Workload(40, 4, 8, 10), "embedded-cpu")
    assert warm.rest_s == pytest.approx(guess.rest_s + 4 * 10 / guess.output_tok_s)
    assert costs_from([], [], WL, "attached").start_s == 0.0


def test_history_of_this_engine_only_gives_start_load_and_rest(fresh_db: Path) -> None:
    seed(fresh_db, ENGINE, [timed(0, 20, 30, 2), timed(60, 22, 30, 4), timed(120, 24, 30, 3)])
    seed(fresh_db, OTHER, [timed(300, 300, 300, 300)])  # another engine: not counted
    seed(fresh_db, ENGINE, [timed(900, 500, 500, 500)], origin="bundle:x.zip")  # a teammate's
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
        # twice the tokens at the measured 400 tok / 30 s: twice the load
        longer = engine_costs(db, ENGINE, Workload(80, 4, 8, 10, num_warmups=0))
    assert costs.measured_runs == 3
    assert (costs.start_s, costs.load_s, costs.rest_s) == pytest.approx((22.0, 30.0, 3.0))
    assert costs.experiment_s == pytest.approx(5.0)  # 2 s before the first run + 3 s after
    assert longer.load_s == pytest.approx(60.0)
    text = costs.describe()
    print(text)
    assert text == (
        "from 3 earlier runs of this engine: start 22 s, load 30 s, stop and the rest 3.0 s a run"
    )
    est = for_experiment(costs, 2, 3)
    assert est.seconds == pytest.approx(5 + 6 * 55)
    assert est.line() == f"estimate: 6 runs, about 6 min ({text})"
    # a workload parameter keeps the server: one start for the whole experiment
    kept = for_experiment(costs, 2, 3, restart=False)
    assert kept.seconds == pytest.approx(5 + 22 + 6 * 33)


def test_auto_repeats_give_the_first_rounds_and_the_most_within_the_budget() -> None:
    costs = costs_from([timed(0, 20, 30, 10)], [], WL, "custom")  # 60 s a run
    auto = for_experiment(costs, 2, 2, max_repeats=10)
    assert (auto.runs, auto.max_runs) == (4, 20)
    assert auto.max_seconds == pytest.approx(costs.experiment_s + 20 * 60)
    assert auto.line().startswith("estimate: 4 runs first, about 4 min; at most 20 runs, about 20")
    capped = for_experiment(costs, 2, 2, max_repeats=10, budget_minutes=10)
    assert capped.max_runs == 9 and "a budget of 10 min allows about 9 runs" in capped.line()
    tight = for_experiment(costs, 2, 2, max_repeats=10, budget_minutes=1)
    assert tight.max_runs == 4  # the first rounds always run
    print(capped.line())


def test_searches_and_plans_count_a_start_and_stop_per_step() -> None:
    costs = costs_from([timed(0, 20, 30, 10)], [], WL, "custom")
    search = for_search(costs, 8)
    assert search.runs == 8
    assert search.seconds == pytest.approx(8 * (costs.experiment_s + 60))
    assert for_search(costs, 8, stored=3).runs == 5
    plan = for_plan(costs, 2, 4, 3)
    assert plan.runs == 2 * 4 + 2 * 3 and plan.to_json()["line"].startswith("estimate: 14 runs")


def test_own_finished_runs_replace_the_history() -> None:
    costs = costs_from([timed(0, 20, 30, 10)], [], WL, "custom")
    own = [timed(0, 5, 10, 1), timed(20, 7, 10, 1), {**timed(40, 100, 100, 100), "status": "x"}]
    mixed = blend(costs, own)
    assert (mixed.start_s, mixed.load_s, mixed.rest_s) == pytest.approx((6.0, 10.0, 1.0))
    assert mixed.basis == "from this experiment's 2 finished runs"
    assert blend(costs, []) is costs


def test_the_budget_asks_the_model_whether_a_round_fits() -> None:
    def run(value: str, t: float, tput: float) -> dict[str, Any]:
        return {
            **timed(t, 10, 15, 5),  # 30 s a run
            "value": value,
            "output_throughput": tput,
            "mean_ttft_ms": 50.0,
            "mean_tpot_ms": 10.0,
        }

    runs = [run("2", 0, 100.0), run("16", 30, 100.0), run("2", 60, 130.0), run("16", 90, 70.0)]
    costs = costs_from([], [{"started_at": at(0), "first_run_at": at(5)}], WL, "custom")
    assert costs.experiment_s == 5.0  # only the runner's start was measured here
    settings = AutoRepeats(budget_minutes=3.0)  # 180 s - 120 s of runs - 5 s: 55 s left
    plan = plan_for([2, 16], runs, settings, costs)
    print(plan.reason)
    assert plan.stop  # a round of 2 runs (60 s by the estimate) does not fit in 55 s
    assert plan.reason.startswith("the time budget is spent: one more round needs about 60 s")
    assert "from this experiment's 4 finished runs: start 10 s, load 15 s" in plan.reason
    assert plan.values["16"].state == "budget"
    roomy = plan_for([2, 16], runs, AutoRepeats(budget_minutes=3.2), costs)  # 67 s left
    assert not roomy.stop and roomy.rounds == 1


def test_time_left_counts_the_runs_done_and_the_one_in_flight(fresh_db: Path) -> None:
    seed(fresh_db, ENGINE, [timed(0, 20, 30, 2)])  # history: 52 s a run
    now = datetime.now(UTC)
    own = [
        timed(-100, 10, 20, 2),  # this experiment's runs: 32 s each
        timed(-60, 10, 20, 2),
        {**timed(-10, None, 0, 0), "status": "running", "finished_at": None, "duration": None},
    ]
    for row in own:  # their stamps relative to now: the one in flight started 10 s ago
        for key in ("started_at", "finished_at"):
            if row[key]:
                row[key] = (now + (datetime.fromisoformat(row[key]) - T0)).isoformat()
    exp_id = seed(fresh_db, ENGINE, own, status="running", runs_done=2, runs_total=6)
    with connect(fresh_db) as db:
        running = db.execute("select max(id) from runs").fetchone()[0]
        repo.update_experiment(db, exp_id, current_run_id=running)
        left = seconds_left(db, queries.get_experiment(db, exp_id))
        line = experiment_line(db, exp_id).line()
    # 4 runs left at 32 s, the last stop (5 s from the history), less the 10 s already run
    assert left == pytest.approx(4 * 32 + 5 - 10, abs=2)
    assert "2 finished run(s) kept" in line and line.startswith("estimate: 4 runs")


def test_about_rounds_like_an_estimate() -> None:
    assert [about(s) for s in (3.2, 42, 88, 91, 250)] == [
        "about 3 s",
        "about 40 s",
        "about 90 s",
        "about 2 min",
        "about 4 min",
    ]


def test_a_resumed_experiment_is_estimated_from_its_own_runs_and_what_its_budget_has_left(
    fresh_db: Path,
) -> None:
    """Seen on the GPU (2026-12-05): `experiment --resume 1 --budget-minutes 22` on a DB whose only
    runs were the experiment's own 4 printed "no runs of this engine yet: a guess: start 90 s";
    and the budget is the whole experiment's, so its finished runs spend part of it."""
    own = [timed(t, 10, 20, 2) for t in (0, 40, 80, 120)]  # 4 finished runs: 32 s each
    exp_id = seed(
        fresh_db,
        ENGINE,
        own,
        status="stopped",
        repeats_auto=1,
        max_repeats=5,
        budget_minutes=3.0,  # 180 s: 5 runs of 32 s after the runner's start; 4 are spent
    )
    with connect(fresh_db) as db:
        line = experiment_line(db, exp_id).line()
    print(line)
    assert "from this experiment's 4 finished runs" in line and "a guess" not in line
    assert "a budget of 3 min allows about 1 run" in line
    assert "at most 2 runs" in line  # the 2 pending runs of the first rounds always run
