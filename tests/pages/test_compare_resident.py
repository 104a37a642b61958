"""Issue 38, item 4 on the Compare page: per experiment, whether its repeats switched resident
servers (switches, starts), the stored check with its numbers and a fall back with its reason;
the decision at the top carries the note that the experiment fell back."""

from __future__ import annotations

from typing import Any

from store import connect
from tests.apptest import open_page, page_text, with_query
from tests.factories import FELL_BACK, give_resident


def test_compare_says_what_resident_engines_did_and_the_decision_notes_the_fall_back(
    dashboard_lab: dict[str, Any],
) -> None:
    exp = dashboard_lab["done_exp"]
    with connect(dashboard_lab["db"]) as db:
        state = give_resident(db, exp)
    at = open_page("app_pages/4_Compare.py", with_query("experiment", exp))
    assert not at.exception, at.exception
    text = page_text(at)
    starts, switches = state["starts"], state["switches"]
    assert f"resident engines: {switches} switches, {starts} starts (a switch: " in text
    assert f"resident check: {state['check']['verdict']} (" in text
    assert "restarted vs " in text and " switched" in text  # the check's numbers
    assert f"resident engines fell back to restarts: {FELL_BACK}" in text
    note = f"Note: resident engines fell back to restarts ({FELL_BACK})"
    assert note in text
    headline = at.get("caption")
    assert any(note in c.value for c in headline)


def test_compare_of_an_experiment_never_resident_says_nothing_of_it(
    dashboard_lab: dict[str, Any],
) -> None:
    at = open_page("app_pages/4_Compare.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    text = page_text(at)
    assert "resident engines" not in text and "resident check" not in text
