"""Issue 25, item 2: New experiment says how long the experiment will take before Start, with the
line `python -m tuning experiment` prints (runs, minutes, what the numbers rest on)."""

from __future__ import annotations

import re
from typing import Any

from tests.apptest import open_page, page_text


def test_new_experiment_shows_the_estimate_before_start(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert not at.exception, at.exception
    text = page_text(at)
    # the default values 2,16 until decided: two rounds first, at most ten runs a value
    assert "estimate: 4 runs first, about " in text and "at most 20 runs" in text
    assert "earlier run" in text or "no runs of this engine yet: a guess" in text
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    at.number_input(key="new_repeats").set_value(3).run()
    assert "estimate: 6 runs, about " in page_text(at)


def test_a_twenty_value_experiment_shows_its_runs_and_minutes(
    dashboard_lab: dict[str, Any],
) -> None:
    """Issue 23's acceptance: 20 values, one run each, say 20 runs and the minutes before Start."""
    at = open_page("app_pages/1_New_experiment.py")
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    at.number_input(key="new_repeats").set_value(1).run()
    at.text_input(key="new_values").set_value(",".join(str(v) for v in range(1, 21))).run()
    assert not at.exception, at.exception
    text = page_text(at)
    assert "estimate: 20 runs, about " in text
    assert re.search(r"estimate: 20 runs, about \d+ min", text), text[:400]
