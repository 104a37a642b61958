"""Issue 41, case 12 (the poisoned history value): a stored value outside a sane range is ignored
by the estimate, which says so, instead of crashing every later experiment of that engine.

Seen on 9aeadaf: `time_to_healthy_s = 1e308` in one stored run raised OverflowError in every
later experiment of that engine; 1e9 gave "about 5,555,556 min"."""

from __future__ import annotations

from pathlib import Path

from store import connect
from tests.tuning.experiment.test_estimate import ENGINE, WL, seed, timed
from tuning.experiment.estimate import blend, costs_from, engine_costs, experiment_line


def test_a_1e308_start_in_history_is_ignored_with_a_note(fresh_db: Path) -> None:
    poisoned = [timed(t, 20, 30, 2, time_to_healthy_s=1e308) for t in (0, 60)]
    seed(fresh_db, ENGINE, [*poisoned, timed(120, 20, 30, 2)])
    pending = {"status": "pending", "started_at": timed(900, 0, 0, 0)["started_at"]}
    later = seed(fresh_db, ENGINE, [{**pending, "finished_at": None}], status="queued")
    with connect(fresh_db, readonly=True) as db:
        line = experiment_line(db, later).line()  # OverflowError on 9aeadaf
    print(line)
    assert "start 20 s" in line  # the one sane start
    assert "ignored 2 stored values outside a sane range" in line
    assert "time to healthy 1e+308 s" in line


def test_a_1e9_start_does_not_turn_an_estimate_into_years(fresh_db: Path) -> None:
    seed(fresh_db, ENGINE, [timed(0, 20, 30, 2, time_to_healthy_s=1e9), timed(60, 20, 30, 2)])
    with connect(fresh_db, readonly=True) as db:
        costs = engine_costs(db, ENGINE, WL)
    assert costs.start_s == 20.0 and costs.rest_s == 2.0
    assert "time to healthy 1,000,000,000 s" in costs.describe()


def test_negative_infinite_and_impossible_rates_are_ignored_and_named() -> None:
    rows = [
        {"id": 1, **timed(0, 20, 30, 2, time_to_healthy_s=-5.0)},
        {"id": 2, **timed(60, 20, 30, 2, duration=float("inf"))},
        {"id": 3, **timed(120, 20, 30, 2, total_output_tokens=581_142_450_502 * 30)},
        {"id": 4, **timed(180, 20, 30, 2)},
    ]
    costs = costs_from(rows, [], WL, "custom")
    text = costs.describe()
    print(text)
    assert costs.start_s == 20.0
    assert costs.load_s == WL.num_requests * WL.output_len / (400 / 30)  # run 4's tok/s
    assert "run 1's time to healthy -5 s" in text and "run 2's load inf s" in text
    assert "run 3's" in text and "tokens in 30 s" in text
    # this experiment's own runs go through the same ranges
    own = blend(costs, [{"id": 9, **timed(300, 20, 30, 2, time_to_healthy_s=1e308)}])
    assert own.start_s == 20.0 and "run 9's time to healthy 1e+308 s" in own.describe()
