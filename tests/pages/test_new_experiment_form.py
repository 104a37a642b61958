"""Issue 23 item 6 from the UI (AppTest, the fake vLLM's settings, the runner's spawn recorded):
New experiment offers "until decided" with a most-runs limit and a time budget, its estimate
follows the choice, Start stores them and the name typed; duplicates, a single value and spaces
are called out; and nothing on the page speaks in CLI flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from store import connect, queries
from tests.apptest import open_page, page_text
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS

CLI_FLAG = re.compile(r"(?:^|\s)--[a-z]")


def _estimate(at: AppTest) -> str:
    return next(c.value for c in at.caption if "estimate:" in c.value)


def _no_cli_words(at: AppTest) -> None:
    text = page_text(at)
    assert not CLI_FLAG.search(text), CLI_FLAG.findall(text)


def test_until_decided_with_its_limits_and_the_name_are_stored(
    spawned: list[int], lab_home: Path
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert at.radio(key="new_repeat_mode").options == ["until decided", "a fixed number"]
    assert _estimate(at).startswith(":material/schedule: estimate: 4 runs first, about")
    _no_cli_words(at)
    at.number_input(key="new_max_repeats").set_value(6).run()
    at.number_input(key="new_budget_minutes").set_value(30.0).run()
    at.text_input(key="new_name").set_value("kv sweep").run()
    assert not at.exception, at.exception
    line = _estimate(at)
    print(line)
    assert "estimate: 4 runs first" in line and "at most 12 runs" in line  # 2 values x 2, x 6
    _no_cli_words(at)
    at.number_input(key="new_budget_minutes").set_value(5.0).run()  # under 12 runs' worth
    assert "a budget of 5 min allows about" in _estimate(at)
    at.number_input(key="new_budget_minutes").set_value(30.0).run()
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    assert len(spawned) == 1
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    picked = {k: exp[k] for k in ("name", "repeats_auto", "max_repeats", "budget_minutes")}
    print(picked)
    assert picked == {
        "name": "kv sweep",
        "repeats_auto": 1,
        "max_repeats": 6,
        "budget_minutes": 30.0,
    }
    assert exp["repeats"] == 2  # the first rounds; the runner adds the rest


def test_a_fixed_number_and_no_name_keep_the_lab_s_name(spawned: list[int], lab_home: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    assert "estimate: 4 runs, about" in _estimate(at)  # two a value: the least that can decide
    assert "cannot decide" not in page_text(at)
    at.number_input(key="new_repeats").set_value(3).run()
    assert "estimate: 6 runs, about" in _estimate(at)
    at.button(key="new_start").click().run()
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert (exp["repeats"], exp["repeats_auto"]) == (3, None)
    assert exp["name"] == f"{exp['param']} = 2, 16"


@pytest.mark.parametrize(
    ("typed", "said", "start"),
    [
        ("2,2", "2 is given twice", False),
        ("2 16", "separate values with commas: 2,16", False),
        ("4", "Only one value of", True),
    ],
)
def test_duplicates_spaces_and_a_single_value_are_called_out(
    spawned: list[int], typed: str, said: str, start: bool
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.text_input(key="new_values").set_value(typed).run()
    assert not at.exception, at.exception
    assert said in page_text(at)
    assert at.button(key="new_start").disabled is not start
    _no_cli_words(at)


def test_the_page_defaults_to_until_decided_with_a_budget_as_the_cli_does(
    spawned: list[int], lab_home: Path
) -> None:
    """Issue 37 item 3: New experiment offered one run a value by default, which can never end
    in a verdict, and said nothing. Start with nothing changed now stores until decided with the
    default budget, the same experiment `python -m tuning experiment --param max-num-seqs
    --values 2,16` stores (tests/tuning/experiment/test_spec.py compares the two objects)."""
    at = open_page("app_pages/1_New_experiment.py")
    assert at.radio(key="new_repeat_mode").value == "auto"
    assert at.number_input(key="new_budget_minutes").value == DEFAULT_BUDGET_MINUTES
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert (exp["repeats_auto"], exp["max_repeats"]) == (1, DEFAULT_MAX_REPEATS)
    assert exp["budget_minutes"] == DEFAULT_BUDGET_MINUTES > 0


def test_one_run_a_value_warns_in_one_line_that_it_cannot_decide(spawned: list[int]) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    at.number_input(key="new_repeats").set_value(1).run()
    warned = [w.value for w in at.warning if "cannot decide" in w.value]
    assert len(warned) == 1 and "\n" not in warned[0], warned
    assert "two runs of each value" in warned[0]
    assert not at.button(key="new_start").disabled  # fixed repeats stay: a warning, not a refusal
    _no_cli_words(at)
