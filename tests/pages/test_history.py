"""The History page (AppTest) on the seeded dashboard lab: filters, notes and tags, hide and
delete runs (with confirmation), and experiments that are still running cannot be deleted."""

from __future__ import annotations

from typing import Any

from store import open_db, queries
from tests.apptest import frame_with, open_page


def test_history_page_filters_edits_and_deletes(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/5_History.py")
    assert not at.exception, at.exception
    runs = frame_with(at, "param")
    assert len(runs) == 11
    at.multiselect(key="hist_status").set_value(["failed"]).run()
    assert len(frame_with(at, "param")) == 3
    at.multiselect(key="hist_status").set_value([]).run()
    at.text_input(key="hist_text").set_value("other-box").run()
    assert len(frame_with(at, "param")) == 1
    at.text_input(key="hist_text").set_value("").run()
    target = dashboard_lab["runs"][0]
    at.selectbox(key="hist_edit_run").set_value(target).run()
    at.text_area(key=f"hist_notes_{target}").set_value("=cmd|' /C calc'!A0 baseline note").run()
    at.text_input(key=f"hist_tags_{target}").set_value("baseline, cpu").run()
    at.button(key="hist_save").click().run()
    assert not at.exception, at.exception
    db = open_db(dashboard_lab["db"])
    row = queries.get_run(db, target)
    assert row["notes"].startswith("=cmd") and row["tags"] == "baseline, cpu"
    at.button(key="hist_hide").click().run()
    assert queries.get_run(db, target)["hidden"] == 1
    assert len(frame_with(at, "param")) == 10
    at.checkbox(key="hist_show_hidden").check().run()
    assert len(frame_with(at, "param")) == 11
    # delete needs the confirmation box first
    victim = dashboard_lab["runs"][2]
    at.selectbox(key="hist_edit_run").set_value(victim).run()
    assert at.button(key="hist_delete").disabled
    at.checkbox(key="hist_confirm_delete").check().run()
    at.button(key="hist_delete").click().run()
    assert not at.exception, at.exception
    assert victim not in {r["id"] for r in queries.list_runs(db, include_hidden=True)}


def test_history_page_experiments_tab(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/5_History.py")
    exps = frame_with(at, "created")
    assert len(exps) == 2
    # a running experiment cannot be deleted
    at.selectbox(key="hist_edit_experiment").set_value(dashboard_lab["live_exp"]).run()
    assert at.button(key="hist_exp_delete").disabled
