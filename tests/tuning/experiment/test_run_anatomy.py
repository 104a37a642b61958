"""Every second of a run accounted for (issue 38, item 1): each run stores its anatomy, named parts
from the previous run's end to its own end that add up to its wall time within 2 %, on the fake
vLLM, with a failed start, a stop of the previous server and a cancelled run among them; the wall
time is checked against the run's own stored end and the previous run's, not only against itself.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries
from tests.fakes.engines import fake_spec
from tuning.experiment.plan import plan_experiment
from tuning.experiment.run_anatomy import TOLERANCE, RunClock, adds_up, time_spent_line
from tuning.experiment.runner import ExperimentRunner, run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.experiment.time_spent import experiment_anatomy
from tuning.measure.traffic.workload import Workload

QUICK = Workload(num_requests=6, concurrency=2, input_len=8, output_len=8, num_warmups=2)
# ISO stamps have millisecond resolution, and a stamp is taken a few writes away from the clock's
# close: a run's wall time may differ from its stamps by this much besides the 2 %.
STAMP_SLACK_S = 0.1


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _keys(run: dict[str, Any]) -> list[str]:
    return [p["key"] for p in run["anatomy"]["parts"]]


def _in_order(keys: list[str], wanted: list[str]) -> bool:
    it = iter(keys)
    return all(any(k == w for k in it) for w in wanted)


def _check_whole(exp: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """Each run's parts add up to its wall time, and that wall time is the time between the
    previous run's end (the runner's start for the first) and its own stored end."""
    previous_end = _at(exp["started_at"])
    for run in runs:
        anat = run["anatomy"]
        assert anat is not None and anat["open"] is False, run["id"]
        parts = sum(p["seconds"] for p in anat["parts"])
        assert abs(parts - anat["wall_s"]) <= TOLERANCE * anat["wall_s"], anat
        assert adds_up(anat)
        stamped = _at(run["finished_at"]) - previous_end
        assert abs(anat["wall_s"] - stamped) <= TOLERANCE * stamped + STAMP_SLACK_S, (
            run["id"],
            anat["wall_s"],
            stamped,
        )
        previous_end = _at(run["finished_at"])


def test_failed_starts_and_restarts_are_accounted_for(lab_home: Path) -> None:
    """max-num-seqs 4, 2, 2, 4 (the counterbalanced order): 4 fails to start (the fake's
    crash_at_start), 2 runs twice, so the third run stops the second's server first."""
    db_path = lab_home / "lab.db"
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs",
            values=[4, 2],
            repeats=2,
            workload=QUICK,
            engine=fake_spec("crash_at_start@max-num-seqs=4"),
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=60)
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    assert [(r["value"], r["status"]) for r in runs] == [
        ("4", "failed"),
        ("2", "done"),
        ("2", "done"),
        ("4", "failed"),
    ]
    _check_whole(exp, runs)
    failed, first_done, second_done, _ = runs
    assert _keys(failed)[0] == "runner_start"
    assert _in_order(_keys(failed), ["prepare", "start", "start_failed"])
    assert "load" not in _keys(failed)
    measured = ["prepare", "start", "engine_facts", "workload", "loadgen", "warmup", "load"]
    assert _in_order(_keys(first_done), ["between", *measured, "drain", "storing"])
    # The second run of 2 restarts: the first's server was stopped while that run stored, and
    # the next start waited for whatever was left of the stop.
    assert _in_order(_keys(second_done), ["between", "prepare", "stop", "start", "load"])
    ahead = {p["key"]: p["seconds"] for p in second_done["anatomy"]["overlapped"]}
    assert "stop_ahead" in ahead
    # The load part is the load generator's own measured duration.
    load = next(p for p in second_done["anatomy"]["parts"] if p["key"] == "load")
    assert load["seconds"] == pytest.approx(second_done["duration"], abs=0.05)
    # The experiment: its runs plus its time outside them (no server left to stop: the last
    # start failed), in one line.
    whole = experiment_anatomy(exp, runs)
    assert whole is not None and exp["anatomy"]["after_runs_s"] == whole["after_runs_s"] >= 0
    assert whole["total_s"] == pytest.approx(
        sum(r["anatomy"]["wall_s"] for r in runs) + whole["after_runs_s"], abs=0.01
    )
    assert " s: " in whole["line"] and "starting" in whole["line"] and "load" in whole["line"]


def test_a_cancelled_run_is_accounted_for_until_it_ended(lab_home: Path) -> None:
    """Stop pressed during the load: the run ends cancelled and its parts still add up."""
    db_path = lab_home / "lab.db"
    slow = Workload(num_requests=200, concurrency=2, input_len=4, output_len=40, num_warmups=0)
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4, 2], workload=slow, engine=fake_spec("itl_ms=20")
        ),
    )
    held: list[ExperimentRunner] = []

    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "phase" and data.get("phase") == "loading" and held:
            held[0].live.cancel.set()  # what the heartbeat does once Stop is asked for

    with ExperimentRunner(db_path, exp_id, on_event, start_timeout=60) as runner:
        held.append(runner)
        runner.run()
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    assert exp["status"] == "cancelled" and [r["status"] for r in runs] == ["cancelled"]
    _check_whole(exp, runs)
    keys = _keys(runs[0])
    assert _in_order(keys, ["runner_start", "prepare", "start", "workload", "load"]), keys
    # Its server was stopped once the runner ended: the experiment's time outside its runs.
    whole = experiment_anatomy(exp, runs)
    assert whole is not None and whole["after_runs_s"] > 0
    wall = runs[0]["anatomy"]["wall_s"]
    assert whole["total_s"] == pytest.approx(wall + whole["after_runs_s"], abs=0.01)


def test_the_parts_tile_the_window_whatever_the_marks() -> None:
    """Marks out of order, repeated or late never leave a gap or an overlap."""
    shown: list[dict[str, Any]] = []
    clock = RunClock(100.0, "between", on_change=shown.append)
    clock.mark("prepare", at=101.0)
    clock.mark("prepare", at=102.0)  # the part in hand: nothing changes
    clock.mark("start", at=100.5)  # before the part in hand began: it starts where that one did
    clock.mark("load", at=110.0)
    clock.retime("load", 108.0)  # the load's own clock said it began earlier
    clock.retime("load", 50.0)  # never before the part it follows
    clock.mark("storing", at=112.0)
    assert shown[-1]["open"] is True and shown[-1]["current"] == "storing"
    anat = clock.close(at=113.0)
    assert [p["key"] for p in anat["parts"]] == ["between", "prepare", "start", "load", "storing"]
    assert [p["seconds"] for p in anat["parts"]] == [1.0, 0.0, 0.0, 11.0, 1.0]
    assert anat["wall_s"] == 13.0 and anat["parts_sum_s"] == 13.0 and not anat["open"]
    clock.mark("late", at=120.0)  # after the close: the stored anatomy stays as it was
    assert clock.snapshot() == anat


def test_the_one_line_summary() -> None:
    groups = {"starting": 276.0, "load": 120.0, "other": 24.0, "stopping": 120.0}
    assert time_spent_line(groups) == "9.0 min: 4.6 starting, 2.0 load, 2.0 stopping, 0.4 other"
    assert time_spent_line({"load": 30.0, "starting": 12.5}) == "42.5 s: 30.0 load, 12.5 starting"
    assert time_spent_line({}) == ""


def test_stored_anatomies_that_are_not_whole_are_read_as_far_as_they_go() -> None:
    """What a bundle or a hand edit can leave: not an object, parts without seconds, no wall."""
    assert not adds_up(None) and not adds_up({"parts": []}) and not adds_up("text")  # type: ignore[arg-type]
    odd = {"wall_s": 10.0, "parts": [{"key": "load", "seconds": 10.0}, "junk", {"key": "x"}]}
    assert adds_up(odd)
    exp = {"id": 1, "anatomy": "not an object", "status": "done"}
    whole = experiment_anatomy(exp, [{"anatomy": odd}, {"anatomy": ["x"]}, {}])
    assert whole is not None and whole["total_s"] == 10.0 and whole["runs_without"] == 2
