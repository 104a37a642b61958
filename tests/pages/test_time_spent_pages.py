"""Issue 38, item 1: Live shows where each run's time went as the run goes (the run in flight up to
now), and Live and Compare say in one line per experiment where its time went, with the estimate
made before it started against what it took."""

from __future__ import annotations

from typing import Any

from store import connect, queries, repo
from tests.apptest import open_page, page_text, with_query
from tuning.experiment.run_anatomy import RunClock

# One run's window: 2 s between runs, 1 s stopping the last server, 40 s starting, 20 s of load.
MARKS = (("prepare", 2.0), ("stop", 3.0), ("start", 4.0), ("load", 44.0), ("storing", 64.0))


def anatomy(close: bool = True) -> dict[str, Any]:
    """A finished run's, or (close=False) one whose load has run for 6 s."""
    clock = RunClock(1000.0, "between")
    for key, at in MARKS if close else MARKS[:-1]:
        clock.mark(key, at=1000.0 + at)
    return clock.close(at=1065.0) if close else clock.snapshot(now=1050.0)


def _give(lab: dict[str, Any], exp_key: str, runs: list[int], last_open: bool = False) -> None:
    with connect(lab["db"]) as db:
        for i, rid in enumerate(runs):
            repo.update_run(db, rid, anatomy_json=anatomy(not (last_open and i == len(runs) - 1)))
        repo.update_experiment(
            db,
            lab[exp_key],
            anatomy_json={"after_runs_s": 5.0},
            estimate_json={"runs": len(runs), "seconds": 900.0, "costs": {"basis": "a guess"}},
        )


def test_live_draws_each_runs_parts_and_the_one_in_flight_so_far(
    dashboard_lab: dict[str, Any],
) -> None:
    runs = [dashboard_lab["live_done"], dashboard_lab["live_run"]]
    _give(dashboard_lab, "live_exp", runs, last_open=True)
    at = open_page("app_pages/3_Live.py", with_query("experiment", dashboard_lab["live_exp"]))
    assert not at.exception, at.exception
    text = page_text(at)
    assert "so far 50.0 s: between runs" in text  # the run in flight, its load still running
    assert "load (measured) 6.0 s" in text  # 1050 - 1044: the load part so far
    assert f"experiment {dashboard_lab['live_exp']}, so far " in text
    assert "not finished yet" in text  # the estimate, beside an experiment that runs
    with connect(dashboard_lab["db"], readonly=True) as db:
        assert queries.get_experiment(db, dashboard_lab["live_exp"])["status"] == "running"


def test_compare_says_where_the_experiments_time_went_against_its_estimate(
    dashboard_lab: dict[str, Any],
) -> None:
    with connect(dashboard_lab["db"], readonly=True) as db:
        runs = queries.experiment_run_ids(db, dashboard_lab["done_exp"])
    _give(dashboard_lab, "done_exp", runs)
    at = open_page("app_pages/4_Compare.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    text = page_text(at)
    n = len(runs)
    total = 65.0 * n + 5.0  # every run's window and the last stop
    assert f"experiment {dashboard_lab['done_exp']}, took {total / 60:.1f} min: " in text
    assert f"{40.0 * n / 60:.1f} starting" in text and f"{20.0 * n / 60:.1f} load" in text
    assert f"estimate before start: {n} runs, about 15 min (a guess)" in text
    assert f"{total / 900.0:.2f}x the estimate" in text


def test_runs_stored_without_anatomy_show_nothing_of_it(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    assert "estimate before start" not in page_text(at) and " took " not in page_text(at)
