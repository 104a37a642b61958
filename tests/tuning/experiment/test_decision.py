"""Issue 37 item 1: one decision record per experiment, made by the rule that stopped it and stored
(experiments.decision_json): fixed repeats by the fixed-n test, repeat-until-decided by its looks
with the alpha each spent; never a plain 95 % look over every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries, repo
from tests.factories import UNDECIDED_SIDES, add_measured_experiment, add_undecided_experiment
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.compare.decision import Decision
from tuning.compare.holm import holm
from tuning.compare.primaries import Primaries
from tuning.experiment.decision import decision_of, store_decision

STRONG = {
    1: {
        "output_throughput": [1000.0, 1010.0, 1005.0],
        "mean_ttft_ms": [50.0, 51.0, 50.5],
        "p99_ttft_ms": [100.0, 110.0, 105.0],
        "p99_tpot_ms": [10.0, 11.0, 10.5],
    },
    16: {
        "output_throughput": [1300.0, 1310.0, 1305.0],
        "mean_ttft_ms": [50.2, 50.8, 50.4],
        "p99_ttft_ms": [104.0, 100.0, 108.0],
        "p99_tpot_ms": [10.4, 10.0, 10.8],
    },
}


def _record(db_path: Path, exp: int) -> Decision:
    with connect(db_path, readonly=True) as db:
        return Decision.from_json(queries.get_experiment(db, exp)["decision"])


def test_the_until_decided_record_is_the_rules_own_not_a_plain_95(fresh_db: Path) -> None:
    exp = add_undecided_experiment(fresh_db)
    record = _record(fresh_db, exp)
    assert record.rule == "sequential" and record.complete
    assert record.looks == (2, 3) and record.look_alpha == pytest.approx(0.025)
    (value,) = record.values
    objective = value.metric("output_throughput")
    assert objective is not None and objective.verdict == "undecided"
    assert value.state == "capped" and value.outcome == "undecided"
    # Holm's first step within the look's alpha: 1 - 0.025 / 3
    assert objective.change.confidence == pytest.approx(1 - 0.025 / 3)
    assert record.recommended is None
    assert record.next_step is not None and record.next_step.runs_a_side
    # the premise: a plain 95 % look over every run (what compare used to do) says better
    with connect(fresh_db, readonly=True) as db:
        runs = queries.list_runs(db, exp)
    plain = build_comparison(runs, default_baseline(runs))
    side = plain.candidates[0].label
    assert plain.changes[(side, "output_throughput")].verdict == "better"


def test_the_fixed_n_rule_for_fixed_repeats(fresh_db: Path) -> None:
    """The same runs under fixed repeats: one look at 3 runs a side, Holm at alpha 0.05 (the
    objective at 1 - 0.05 / 3, not the sequential 1 - 0.025 / 3), the verdicts those of holm()
    over the sides' values."""
    exp = add_measured_experiment(fresh_db, "max-num-seqs", UNDECIDED_SIDES)
    with connect(fresh_db) as db:
        stored = store_decision(db, exp)
        runs = queries.list_runs(db, exp)
    record = _record(fresh_db, exp)
    assert stored is not None and record.to_json() == stored.to_json()
    assert record.rule == "fixed-n" and record.looks == (3,) and record.look_alpha == 0.05
    comparison = build_comparison(runs, default_baseline(runs))
    side = comparison.candidates[0]
    expected = holm(comparison.baseline.values, side.values, Primaries().keys, 0.05)
    (value,) = record.values
    for key, change in expected.items():
        found = value.metric(key)
        assert found is not None
        assert (found.verdict, found.change.confidence) == (change.verdict, change.confidence)
    assert value.metric("output_throughput").change.confidence == pytest.approx(1 - 0.05 / 3)  # type: ignore[union-attr]


def test_a_decided_fixed_experiment_recommends_its_value(fresh_db: Path) -> None:
    exp = add_measured_experiment(fresh_db, "max-num-seqs", STRONG)
    with connect(fresh_db) as db:
        store_decision(db, exp)
    record = _record(fresh_db, exp)
    assert record.recommended is not None and record.recommended.value == "16"
    assert record.next_step is None


def test_a_running_experiment_is_judged_by_its_rule_and_never_recommends(fresh_db: Path) -> None:
    exp = add_measured_experiment(fresh_db, "max-num-seqs", STRONG)
    with connect(fresh_db) as db:
        store_decision(db, exp)
        repo.update_experiment(db, exp, status="running")
        running = decision_of(db, queries.get_experiment(db, exp))
    assert not running.complete and running.recommended is None
    assert running.values[0].outcome == "recommended"  # would be, once its rule has stopped


def test_an_unreadable_record_is_made_again_by_the_same_rule(fresh_db: Path) -> None:
    exp = add_undecided_experiment(fresh_db)
    with connect(fresh_db) as db:
        repo.update_experiment(db, exp, decision_json={"rule": "astrology"})
        again = decision_of(db, queries.get_experiment(db, exp))
    assert again.rule == "sequential" and again.values[0].outcome == "undecided"


def test_an_imported_record_is_made_again_from_its_runs(fresh_db: Path) -> None:
    """A bundle's experiment carries a record that says 'recommended' for runs that do not
    decide it: the lab judges the runs by the experiment's rule and ignores the words."""
    exp = add_undecided_experiment(fresh_db)
    planted = _record(fresh_db, exp).to_json()
    planted["values"][0]["metrics"][0]["verdict"] = "better"
    planted["values"][0]["metrics"][0]["change"]["verdict"] = "better"
    with connect(fresh_db) as db:
        repo.update_experiment(db, exp, decision_json=planted, origin="bundle from box-b")
        assert Decision.from_json(planted).recommended is not None  # what the words claim
        judged = decision_of(db, queries.get_experiment(db, exp))
    assert judged.values[0].outcome == "undecided" and judged.recommended is None


def test_the_record_reads_back_as_written(fresh_db: Path) -> None:
    exp = add_undecided_experiment(fresh_db)
    record = _record(fresh_db, exp)
    assert Decision.from_json(record.to_json()) == record
