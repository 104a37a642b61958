"""Issue 25, item 2: `search` and `plan` print their estimate on stderr before anything starts
(a search: its budget of runs less what is stored; a plan: its searches and confirm runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.engines import fake_spec
from tuning.cli.estimate import say_estimate, search_costs
from tuning.cli.search import search_estimate
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.strategy import Space
from tuning.experiment.estimate import for_plan
from tuning.measure.traffic.workload import Workload


def spec() -> SearchSpec:
    return SearchSpec(
        param="max-num-seqs",
        space=Space(1, 32, True),
        objective="output_throughput",
        workload=Workload(num_requests=8, concurrency=2, input_len=8, output_len=8),
        engine=fake_spec(),
        budget_runs=5,
    )


def test_a_search_and_a_plan_say_their_estimate_first(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = search_estimate(spec(), fresh_db)
    err = capsys.readouterr().err
    assert out["runs"] == 5 and out["what"] == "search"
    budget, estimate = err.splitlines()  # what the budget buys (issue 37 item 4), then its time
    assert budget.startswith("budget 5 runs: up to 4 explore the range (a coarse pass of 4")
    assert "too few to give two values 2 runs each" in budget  # and it says so, first
    assert estimate.startswith("estimate: 5 runs, about ") and "a guess" in estimate
    plan = say_estimate(for_plan(search_costs(spec(), fresh_db), 2, 5, 3))
    assert plan["runs"] == 2 * 5 + 2 * 3
    assert capsys.readouterr().err.startswith("estimate: 16 runs, about ")
    # no DB yet (the first call of a lab): the guess, nothing created
    missing = fresh_db.parent / "none.db"
    assert search_costs(spec(), missing).measured_runs == 0 and not missing.exists()
