"""Issue 37 items 1 and 5 on the pages (AppTest): Compare and Home read the experiment's own
decision record. An experiment its rule left undecided reads undecided (although a plain 95 %
interval over all its runs excludes zero), with what would decide it, a button that runs it and
the command; a decided one shows "Recommendation" and its `vllm serve` line."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries
from tests.apptest import open_page, page_text, with_query
from tests.factories import add_measured_experiment, add_undecided_experiment
from tests.tuning.experiment.test_decision import STRONG
from tuning.compare.decision import NextStep
from tuning.experiment import supervisor
from tuning.experiment.decision import store_decision
from ui.decision import MORE_RUNS_KEY, start_more_runs


def _headline(at: object) -> str:
    box = next(n for n in at.main.children.values() if getattr(n, "key", None) == "cmp_headline")  # type: ignore[attr-defined]
    out: list[str] = []

    def walk(node: object) -> None:
        value = getattr(node, "value", None)
        if isinstance(value, str):
            out.append(value)
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(box)
    return "\n".join(out)


def test_compare_reads_the_rules_undecided(fresh_db: Path) -> None:
    exp = add_undecided_experiment(fresh_db)
    at = open_page("app_pages/4_Compare.py", with_query("experiment", exp))
    assert not at.exception, at.exception
    head = _headline(at)
    assert "objective output throughput +14.3 % (undecided)" in head
    assert "**Not decided:** 2 more runs a side" in head
    assert "(better)" not in head and "Recommendation" not in head
    assert not at.success  # no green "Recommendation" anywhere on the page
    button = at.button(key=MORE_RUNS_KEY)
    assert button.label.startswith("Run 2 more runs a side")
    assert any(f"--resume {exp} --max-repeats 5" in c.value for c in at.code)


def test_compare_shows_a_decided_recommendation_with_its_serve_line(fresh_db: Path) -> None:
    exp = add_measured_experiment(fresh_db, "max-num-seqs", STRONG)
    with connect(fresh_db) as db:
        store_decision(db, exp)
    at = open_page("app_pages/4_Compare.py", with_query("experiment", exp))
    assert not at.exception, at.exception
    (rec,) = [s.value for s in at.success]
    assert rec.startswith("**Recommendation:** Set max-num-seqs = 16: output throughput +")
    assert any("--max-num-seqs 16" in c.value and "serve" in c.value for c in at.code)


def test_home_shows_the_latest_decision_as_recorded(fresh_db: Path) -> None:
    add_undecided_experiment(fresh_db)
    at = open_page(None)
    text = page_text(at)
    assert "Latest decision" in text
    assert "experiment 1: stream-interval sweep: undecided (2 more runs a side" in text
    assert "recommended" not in text.split("Latest decision", 1)[1].split("\n")[1]


def test_the_button_goes_on_with_the_experiment(
    fresh_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the button runs: the experiment under the step's limits, queued for its runner (the
    runner itself is not started here)."""
    exp = add_undecided_experiment(fresh_db)
    started: list[int] = []
    monkeypatch.setattr(supervisor, "spawn_runner", lambda _db, eid: started.append(eid) or 1)
    left = start_more_runs(fresh_db, exp, NextStep(2, 190.0, "about 3 min", 5))
    with connect(fresh_db, readonly=True) as db:
        row = queries.get_experiment(db, exp)
    assert left > 0 and started == [exp]
    assert row["status"] == "queued" and row["max_repeats"] == 5 and row["repeats_auto"] == 1
