"""Issue 13 item 4 from the UI (AppTest, fake vLLM): New experiment's search mode starts the search
as its own process (`python -m tuning search ... --record ID`), one thing at a time per machine,
and shows its decision log and chosen value read from the store; Stop ends it cleanly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from core.status import is_active
from store import connect, queries
from tests.apptest import frame_with, open_page, page_text
from tests.checks import wait_for
from tests.fakes.engines import fake_settings_env
from tuning.engine.procs import group_alive

FORM = {
    "srch_budget": 2,
    "srch_coarse": 2,
    "srch_requests": 4,
    "srch_concurrency": 2,
    "srch_input": 4,
    "srch_output": 3,
}


def _search(db: Path, search_id: int) -> dict[str, Any]:
    with connect(db, readonly=True) as conn:
        return queries.get_search(conn, search_id)


def _fill(at: AppTest, lo: int, hi: int, **overrides: int) -> None:
    at.radio(key="new_mode").set_value("search").run()
    at.selectbox(key="srch_param").set_value("max-num-seqs").run()
    at.number_input(key="srch_lo_max-num-seqs").set_value(lo)
    at.number_input(key="srch_hi_max-num-seqs").set_value(hi)
    for key, value in {**FORM, **overrides}.items():
        at.number_input(key=key).set_value(value)
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def fake_lab(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    return lab_home / "lab.db"


def test_search_from_the_page_runs_in_its_own_process(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    _fill(at, 2, 8)
    at.button(key="srch_start").click().run()
    assert any("Search 1 started" in s.value for s in at.success), [s.value for s in at.success]
    row = _search(fake_lab, 1)
    assert row["runner_pid"] and row["spec"]["range"] == [2.0, 8.0]
    at.run()  # while it runs: nothing else starts, in either mode
    assert at.button(key="srch_start").disabled
    assert "search 1 (max-num-seqs) in " in page_text(at)
    at.radio(key="new_mode").set_value("values").run()
    assert at.button(key="new_start").disabled
    home = open_page(None)  # the demo waits too: between steps, or while a step runs
    text = page_text(home)
    assert "A search is running" in text or "Running now: experiment 1 — search" in text, text
    assert not home.button
    assert wait_for(lambda: not is_active(_search(fake_lab, 1)["status"]), timeout=600, poll=1)
    row = _search(fake_lab, 1)
    log = Path(row["log_path"]).read_text()
    assert row["status"] == "done", (row, log)
    # two values, one run each: no choice (issue 37 item 4), the leader named
    decision = row["result"]["decision"]
    assert row["result"]["chosen"] is None and decision["outcome"] == "undecided"
    assert decision["leader"] in (2, 8) and len(row["result"]["runs"]) == 2
    assert json.loads(log[log.index("{") :])["runs"] == row["result"]["runs"]  # its --json output
    with connect(fake_lab, readonly=True) as db:  # every step an ordinary run
        runs = queries.list_runs(db, include_hidden=True)
    assert sorted(int(r["id"]) for r in runs) == sorted(row["result"]["runs"])
    assert {r["status"] for r in runs} == {"done"} and {r["param"] for r in runs} == {
        "max-num-seqs"
    }
    at.radio(key="new_mode").set_value("search").run()
    text = page_text(at)
    assert "Chosen" not in text
    assert "**Decision:** undecided: no value has 2 runs (tried once: no interval yet)" in text
    assert f"leader {decision['leader']}" in text
    steps = frame_with(at, "why")
    assert list(steps["value"]) == [2.0, 8.0] and steps["why"][0].startswith("coarse pass")
    assert not at.button(key="srch_start").disabled  # free again


def test_stop_ends_the_search_and_its_server(fake_lab: Path) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    _fill(at, 2, 8, srch_budget=6, srch_requests=400, srch_output=40)
    at.button(key="srch_start").click().run()

    def measuring() -> bool:
        with connect(fake_lab, readonly=True) as db:
            return any(r["status"] == "running" for r in queries.list_runs(db, include_hidden=True))

    assert wait_for(measuring, timeout=300, poll=0.5)
    at.run()
    at.button(key="srch_stop").click().run()
    assert wait_for(lambda: not is_active(_search(fake_lab, 1)["status"]), timeout=300, poll=1)
    row = _search(fake_lab, 1)
    assert row["status"] == "cancelled" and "SIGTERM" in row["error"]
    with connect(fake_lab, readonly=True) as db:
        runs = queries.list_runs(db, include_hidden=True)
    assert all(not is_active(r["status"]) for r in runs)
    servers = [int(r["server_pid"]) for r in runs if r.get("server_pid")]
    groups = [*servers, int(row["runner_pid"])]  # its server's and its own: nothing left
    assert servers and wait_for(lambda: not any(map(group_alive, groups)), timeout=60, poll=0.5)
