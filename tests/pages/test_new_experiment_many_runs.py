"""Issue 41 case 12 on New experiment: a pasted list of 10,000 values started at once (about
16,668 min) without a word, and values or a baseline line of 5,000-level nested JSON raised
RecursionError in the page. Over 64 runs, Start is off until a tick that says how many; deep JSON
is an error next to its field, with Start off."""

from __future__ import annotations

from tests.apptest import open_page

DEEP = "[" * 5_000 + "]" * 5_000


def test_ten_thousand_values_wait_for_a_tick_that_says_how_many(spawned: list[int]) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.text_input(key="new_values").set_value(",".join(map(str, range(1, 10_001)))).run()
    assert not at.exception, at.exception
    tick = at.checkbox(key="new_many_runs")  # until decided: up to ten runs a value
    assert "100,000 runs (10,000 values)" in tick.label and not tick.value
    assert at.button(key="new_start").disabled
    tick.check().run()
    assert not at.button(key="new_start").disabled
    at.text_input(key="new_values").set_value("2,16").run()  # under the cap: no tick asked
    assert not any(c.key == "new_many_runs" for c in at.checkbox)
    assert not at.button(key="new_start").disabled
    assert spawned == []


def test_deep_json_in_the_values_or_the_baseline_is_an_error_not_a_crash(
    spawned: list[int],
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.text_input(key="new_values").set_value(DEEP).run()
    assert not at.exception, at.exception
    assert any("JSON nested deeper than 64 levels" in e.value for e in at.error)
    assert at.button(key="new_start").disabled
    at.text_input(key="new_values").set_value("2,16").run()
    at.text_area(key="new_baseline").set_value(f"compilation-config={DEEP}").run()
    assert not at.exception, at.exception
    assert any("baseline compilation-config: JSON nested" in e.value for e in at.error)
    assert at.button(key="new_start").disabled
