"""Issue 37 item 2 on New experiment (AppTest, the fake vLLM's settings, the runner's spawn
recorded): "What decides" names the objective and the guards, defaults output throughput guarded
by p99 TTFT and p99 TPOT, and Start stores what was picked on the experiment."""

from __future__ import annotations

from pathlib import Path

from store import connect, queries
from tests.apptest import open_page


def test_the_defaults_are_stored(spawned: list[int], lab_home: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert at.selectbox(key="new_objective").value == "output_throughput"
    assert at.multiselect(key="new_guards").value == ["p99_ttft_ms", "p99_tpot_ms"]
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert exp["objective"] == "output_throughput"
    assert exp["guards"] == ["p99_ttft_ms", "p99_tpot_ms"]


def test_the_objective_and_guards_picked_are_stored(spawned: list[int], lab_home: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="new_objective").set_value("mean_ttft_ms").run()
    at.multiselect(key="new_guards").set_value(["p99_e2el_ms", "failed"]).run()
    assert "mean_ttft_ms" not in at.multiselect(key="new_guards").options  # not its own guard
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert (exp["objective"], exp["guards"]) == ("mean_ttft_ms", ["p99_e2el_ms", "failed"])
