"""Issue 21 item 5 from the UI (AppTest, fake vLLM whose parser is tests/fakes/fake_vllm_pkg): New
experiment's picker searches every flag of the engine's own vLLM, shows the chosen one's type,
default, choices and help, refuses what the lab never tunes with the reason, checks values as the
user types and with vLLM's own parser on Start, and the baseline takes any allowed flag."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from core.status import is_active
from store import connect, queries
from tests.apptest import open_page, page_text
from tests.checks import wait_for
from tests.fakes.engines import fake_settings_env

FAKE_PKG = Path(__file__).resolve().parents[1] / "fakes" / "fake_vllm_pkg"
SMALL = {"new_requests": 4, "new_concurrency": 2, "new_input": 8, "new_output": 4}


@pytest.fixture
def fake_lab(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake engine, whose interpreter (this one) imports the fake `vllm` package."""
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{FAKE_PKG}{os.pathsep}{path}" if path else str(FAKE_PKG))
    assert sys.executable
    return lab_home / "lab.db"


def _experiments(db: Path) -> list[dict[str, Any]]:
    if not db.exists():
        return []
    with connect(db, readonly=True) as conn:
        return queries.list_experiments(conn, include_hidden=True)


def _offered(at: AppTest) -> list[str]:
    """The picker's names (its options read `name · group (type)`)."""
    return [o.split(" · ")[0] for o in at.selectbox(key="new_param").options]


def _search(at: AppTest, word: str) -> list[str]:
    at.text_input(key="new_flag_search").set_value(word).run()
    assert not at.exception, at.exception
    return _offered(at) if any(s.key == "new_param" for s in at.selectbox) else []


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_search_offers_the_engine_flags_with_their_help(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert "max-num-seqs" in _offered(at)  # curated, as before
    options = _search(at, "schedul")
    assert "scheduling-policy" in options and "async-scheduling" in options
    assert "kv-cache-dtype" not in options  # the search filters the curated ones too
    at.selectbox(key="new_param").set_value("scheduling-policy").run()
    assert at.text_input(key="new_values").value == "fcfs,priority"  # its choices, to compare
    assert _search(at, "async-sched") == ["async-scheduling"]  # the search left the choice out
    assert at.text_input(key="new_values").value == "false,true"  # values follow the new flag
    _search(at, "schedul")
    at.selectbox(key="new_param").set_value("scheduling-policy").run()
    text = page_text(at)
    assert "The scheduling policy to use" in text, text
    assert "SchedulerConfig" in text and "fcfs" in text and "priority" in text
    assert "default" in text and "choice" in text
    group = at.selectbox(key="new_flag_group")  # grouped like vLLM's help groups
    assert "SchedulerConfig" in group.options and "VllmConfig" in group.options
    at.text_input(key="new_flag_search").set_value("")  # read once, the catalog stays
    group.set_value("VllmConfig").run()
    assert "compilation-config" in _offered(at)
    assert "scheduling-policy" not in _offered(at)


def test_refused_flags_are_not_offered_and_say_why(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert "trust-remote-code" not in _search(at, "trust")
    text = page_text(at)
    assert "trust-remote-code" in text and "it reads a file or loads code" in text, text
    assert "host" not in _search(at, "host")
    assert "who can reach the server" in page_text(at)
    assert not _experiments(fake_lab)


def test_a_list_valued_flag_is_offered_and_takes_lists(fake_lab: Path) -> None:
    """Issue 40 item 5: `cudagraph-capture-sizes` (nargs +) was listed as refused because it
    "takes several values at once (nargs +)"; it is offered, says how to write its values, and
    shows each list in words."""
    at = open_page("app_pages/1_New_experiment.py")
    assert _search(at, "cudagraph") == ["cudagraph-capture-sizes"]
    assert at.selectbox(key="new_param").options == [
        "cudagraph-capture-sizes · VllmConfig (list of int)"
    ]
    at.selectbox(key="new_param").set_value("cudagraph-capture-sizes").run()
    text = page_text(at).replace("\\", "")  # markdown's escapes
    assert "a list of whole numbers, each value in brackets, as [1,2,4,8]" in text, text
    assert "nargs" not in text
    at.text_input(key="new_values").set_value("1,2,4,8").run()
    assert any("write each in brackets" in e for e in _errors(at)), _errors(at)
    assert at.button(key="new_start").disabled
    at.text_input(key="new_values").set_value("[1,2,4,8],[1,2,4,8,16,32]").run()
    assert not _errors(at), _errors(at)
    captions = " ".join(c.value for c in at.caption)
    assert "will run: ` 1, 2, 4, 8 ` · ` 1, 2, 4, 8, 16, 32 `" in captions, captions
    assert not _experiments(fake_lab)


def test_malformed_json_is_refused_and_nothing_starts(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    _search(at, "compilation")
    at.selectbox(key="new_param").set_value("compilation-config").run()
    at.text_input(key="new_values").set_value('{"mode": 3,}').run()
    assert any("compilation-config" in e and "is not JSON" in e for e in _errors(at)), _errors(at)
    assert at.button(key="new_start").disabled
    # JSON the lab reads, but vLLM's own model refuses: said next to the field on Start.
    at.text_input(key="new_values").set_value('{"mode": 3}, {"bogus": 1}').run()
    assert not _errors(at), _errors(at)
    at.button(key="new_start").click().run()
    errors = _errors(at)
    assert any("refused by vLLM's own parser" in e and "bogus" in e for e in errors), errors
    assert not at.success and not _experiments(fake_lab)


def test_baseline_takes_any_allowed_flag(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.text_area(key="new_baseline").set_value("host=0.0.0.0").run()
    errors = _errors(at)
    assert any(e.startswith("baseline: host: never tuned") for e in errors), errors
    assert any("who can reach the server" in e for e in errors)
    assert at.button(key="new_start").disabled
    at.text_area(key="new_baseline").set_value("scheduling-policy=lifo").run()
    assert any("scheduling-policy" in e and "lifo" in e for e in _errors(at)), _errors(at)
    at.text_area(key="new_baseline").set_value("scheduling-policy=priority").run()
    assert not _errors(at), _errors(at)
    assert not at.button(key="new_start").disabled
    # A baseline value only vLLM's own parser refuses: said on Start, nothing written.
    at.text_area(key="new_baseline").set_value('compilation-config={"bogus": 1}').run()
    assert not _errors(at), _errors(at)
    at.button(key="new_start").click().run()
    errors = _errors(at)
    assert any(e.startswith("compilation-config: refused by vLLM's own parser") for e in errors)
    assert not at.success and not _experiments(fake_lab)


def test_every_flag_on_request_and_a_missing_vllm_said(
    fake_lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    assert "new_flag_group" not in [s.key for s in at.selectbox]  # nothing read until asked
    at.button(key="new_flags_all").click().run()
    assert "SchedulerConfig" in at.selectbox(key="new_flag_group").options
    assert "long-prefill-token-threshold" in _offered(at)
    # An interpreter without vLLM: the curated parameters stay, and the page says why.
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setenv("TUNING_LAB_HOME", str(fake_lab.parent / "other"))
    monkeypatch.setenv("TUNING_LAB_DB", str(fake_lab.parent / "other" / "lab.db"))
    at = open_page("app_pages/1_New_experiment.py")
    assert _search(at, "seqs") == ["max-num-seqs"]
    warnings = [w.value for w in at.warning]
    assert any("Only the lab's curated parameters" in w for w in warnings), warnings


def test_start_a_learned_flag_from_the_page(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    _search(at, "schedul")
    at.selectbox(key="new_param").set_value("scheduling-policy").run()
    at.text_input(key="new_values").set_value("fcfs,priority")
    at.text_area(key="new_baseline").set_value("async-scheduling=false")
    for key, value in SMALL.items():
        at.number_input(key=key).set_value(value)
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    at.number_input(key="new_repeats").set_value(1)
    at.run()
    assert not _errors(at), _errors(at)
    at.button(key="new_start").click().run()
    assert any("Experiment 1 started" in s.value for s in at.success), _errors(at)
    (exp,) = _experiments(fake_lab)
    assert exp["param"] == "scheduling-policy" and exp["values"] == ["fcfs", "priority"]
    learned = exp["engine"]["learned"]
    assert learned["scheduling-policy"]["choices"] == ["fcfs", "priority"]
    assert learned["async-scheduling"]["source"] == "learned"
    assert exp["config"]["async-scheduling"] is False
    assert wait_for(lambda: not is_active(str(_experiments(fake_lab)[0]["status"])), 600, 1)
    with connect(fake_lab, readonly=True) as db:
        runs = queries.list_runs(db, include_hidden=True)
    assert sorted((r["value"], r["status"]) for r in runs) == [
        ("fcfs", "done"),
        ("priority", "done"),
    ], [r.get("error") for r in runs]


def test_an_older_labs_catalog_is_read_again_and_the_knob_group_opens_on_nothing(
    fake_lab: Path,
) -> None:
    """Issue 40 item 4: a catalog an older lab cached (another `format`, CMAKE_BUILD_TYPE among
    its knobs) was used as it was, and the environment group opened on CMAKE_BUILD_TYPE with a
    red error; it is read again, the group preselects nothing, and the refused knobs are folded
    into one expander with their reasons (not one grey line each before the picker)."""
    import json

    at = open_page("app_pages/1_New_experiment.py")
    at.button(key="new_flags_all").click().run()
    assert not at.exception, at.exception
    with connect(fake_lab) as db:
        (raw,) = db.execute("SELECT catalog_json FROM engine_flags").fetchone()
        old = json.loads(raw)
        old["format"] = 3
        old["env"] = [{"name": "CMAKE_BUILD_TYPE", "kind": "str", "default": "Debug"}, *old["env"]]
        db.execute("UPDATE engine_flags SET catalog_json = ?", [json.dumps(old)])
    at = open_page("app_pages/1_New_experiment.py")
    assert "new_flag_group" not in [s.key for s in at.selectbox]  # not the older reading
    at.button(key="new_flags_all").click().run()
    at.selectbox(key="new_flag_group").set_value("Environment knobs (VLLM_*)").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="new_param").value is None  # nothing preselected
    assert "CMAKE_BUILD_TYPE" not in _offered(at)
    assert not at.error, [e.value for e in at.error]
    assert not [c.value for c in at.caption if str(c.value).startswith("Not offered")]
    (folded,) = [e for e in at.expander if "not offered, and why" in e.label]
    words = " ".join(m.value for m in folded.markdown).replace("\\", "")
    assert "VLLM_HOST_IP: it changes who can reach the server" in words
