"""A `suspect` run (issue 41, item 3) is a result that is not counted: a resume does not run it
again and the experiment is done, but repeat-until-decided and a search take none of its numbers;
a search still knows that its value started (it is no failed start)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core import status
from store import connect, repo
from tests.factories import add_experiment, add_run
from tests.tuning.experiment.test_repeats import stored
from tests.tuning.search.test_record import _spec
from tuning.decide.search.driver import observations
from tuning.decide.search.record import step_prefix
from tuning.experiment.outcome import experiment_verdict, remaining
from tuning.experiment.repeats import AutoRepeats, plan_for

WORDS = "4 of 4 requests had a usage that cannot be true"


def suspect(value: str, tput: float, **extra: object) -> dict[str, object]:
    """A stored run the runner found suspect: measured, its health saying why."""
    return {**stored(value, tput, **extra), "status": "suspect", "health": {"suspect": [WORDS]}}


def test_a_suspect_run_is_a_result_kept_on_resume_and_its_reasons_read_back() -> None:
    plan = [(2, 0), (16, 0)]
    runs = [suspect("2", 1e11, repeat_index=0), stored("16", 100.0, repeat_index=0)]
    assert remaining(plan, runs) == []  # 9aeadaf: ran the suspect pair again
    assert experiment_verdict([runs[0]]) == (status.Status.DONE, None)
    assert status.suspect_reasons(runs[0]) == [WORDS]
    raw = {"status": "suspect", "health_json": '{"suspect": ["x"]}'}
    assert status.suspect_reasons(raw) == ["x"]
    assert status.suspect_reasons(stored("2", 100.0)) == []


def test_repeats_count_a_suspect_run_as_tried_without_its_numbers() -> None:
    runs = [stored("2", 100.0), suspect("16", 1e11), stored("2", 101.0), suspect("16", 1e11)]
    plan = plan_for([2, 16], runs, AutoRepeats(max_repeats=6))
    state = plan.values["16"]
    assert state.attempts == 2  # tried twice
    assert state.state == "failed" and "16" not in plan.pending  # ... and no measurement
    assert "better" not in str(state)  # 1e11 tok/s never decided anything


def test_a_search_sees_a_suspect_step_as_started_but_unscored(fresh_db: Path) -> None:
    spec, key = _spec(), "k1"
    rng = np.random.default_rng(1)
    with connect(fresh_db) as db:
        for value, status in ((2, "done"), (4, "suspect")):
            name = f"{step_prefix(key)} max-num-seqs = {value}"
            exp = add_experiment(db, values=[value], name=name)
            rid = add_run(db, exp, seq=0, value=value, rng=rng)
            repo.update_run(db, rid, status=status, output_throughput=1e11 if value == 4 else 9.0)
    stored = observations(fresh_db, spec, key)
    obs, log = stored.obs, stored.log
    by_value = {o.value: o for o in obs}
    race = {v.value: v for v in stored.values}  # the race counts no number of it either
    assert race[4.0].n == 0 and race[4.0].failed_after is None and race[2.0].objective == (9.0,)
    assert by_value[4.0].started  # 9aeadaf: a failed start ("4 does not start")
    assert by_value[4.0].score is None and by_value[2.0].score == 9.0
    assert [e["status"] for e in log] == ["done", "suspect"]
