"""The app's pages through app.py on an empty lab and on edge cases: a queued experiment with no
run, a single-run experiment, and runs of two experiments with different parameters from a link."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store import connect
from tests.apptest import open_page, page_text, with_query
from tests.factories import add_experiment, add_run


@pytest.mark.parametrize(
    "page", ["app_pages/3_Live.py", "app_pages/4_Compare.py", "app_pages/5_History.py"]
)
def test_pages_on_an_empty_lab(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("TUNING_LAB_DB", str(tmp_path / "lab.db"))
    at = open_page(page)
    assert not at.exception, at.exception
    assert "No " in page_text(at) or "Nothing" in page_text(at)


def test_pages_on_edge_cases(dashboard_lab: dict[str, Any]) -> None:
    """A queued experiment with no runs, a single-run experiment, and runs of two experiments
    with different parameters picked together from a link."""
    with connect(dashboard_lab["db"]) as db:
        add_experiment(db, name="queued", param="block-size", values=[16], status="queued")
        single = add_experiment(db, name="one run", values=[4])
        only = add_run(db, single, seq=0, value=4, rng=np.random.default_rng(3))
    at = open_page("app_pages/3_Live.py")  # the queued one is active, without a run yet
    assert not at.exception, at.exception
    at = open_page("app_pages/4_Compare.py", with_query("experiment", single))
    assert not at.exception, at.exception
    assert "No candidate side" in page_text(at)
    mixed = [dashboard_lab["runs"][0], dashboard_lab["runs"][1], only, dashboard_lab["live_done"]]
    at = open_page(
        "app_pages/4_Compare.py",
        with_query("runs", ",".join(map(str, mixed))),
    )
    assert not at.exception, at.exception
    at.multiselect(key="cmp_baseline_runs").set_value([]).run()
    assert not at.exception, at.exception
    assert "Pick at least one baseline run" in page_text(at)


# --- the entry: app.py, with the sidebar as it was (issue 39, item 7) ---------------------------
SIDEBAR = [  # what the sidebar said when Streamlit named the pages from Home.py and pages/*.py
    ("Home", ""),
    ("New experiment", "New_experiment"),
    ("Runs", "Runs"),
    ("Live", "Live"),
    ("Compare", "Compare"),
    ("History", "History"),
    ("Settings", "Settings"),
    ("Searches", "Searches"),
]


def _navigation_sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every navigation message the app sends the browser (the sidebar's entries), as it goes."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    sent: list[Any] = []
    enqueue = ScriptRunContext.enqueue

    def record(self: ScriptRunContext, msg: Any) -> None:
        if msg.WhichOneof("type") == "navigation":
            sent.append(msg.navigation)
        enqueue(self, msg)

    monkeypatch.setattr(ScriptRunContext, "enqueue", record)
    return sent


def test_app_py_is_the_entry_and_the_sidebar_still_reads_home_first(
    dashboard_lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry was Home.py only so that the sidebar's first entry read "Home" (Streamlit names
    the entry by its file: app.py read "app"); app.py's navigation names each page itself, and
    every page keeps its label and URL path (bookmarks go on working)."""
    sent = _navigation_sent(monkeypatch)
    at = open_page("app_pages/3_Live.py", home_first=True)
    assert [p.url_pathname for p in sent[-1].app_pages] == [path for _, path in SIDEBAR]
    for nav in sent:  # Home, then Live: app.py drew the sidebar both times (no legacy pages/ mode)
        assert [(p.page_name, p.url_pathname) for p in nav.app_pages] == SIDEBAR
        assert [p.is_default for p in nav.app_pages] == [True] + [False] * 7
    assert len(sent) == 2 and sent[-1].page_script_hash != sent[0].page_script_hash
    assert "Live" in [t.value for t in at.title]


def test_a_render_reads_through_one_connection_closed_when_the_page_is_drawn(
    dashboard_lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ui.common.db() once reaped and returned a new connection nobody closed, three of them per
    render of Runs (ui/findings.py); now each render opens at most one, on first use, and app.py
    closes it when the page is drawn or stops (st.stop on a lab with no runs)."""
    import sqlite3

    import ui.common

    opened: list[Any] = []
    real = ui.common.open_db

    def counted(path: Any, **kw: Any) -> Any:
        opened.append(real(path, **kw))
        return opened[-1]

    monkeypatch.setattr(ui.common, "open_db", counted)
    at = open_page("app_pages/2_Runs.py", home_first=True)  # Home, then Runs with findings
    assert "Findings for run" in page_text(at)
    assert len(opened) == 2  # one per render: Home's, Runs'
    monkeypatch.setenv("TUNING_LAB_DB", str(dashboard_lab["db"].parent / "empty.db"))
    at.switch_page("app_pages/2_Runs.py").run()  # a new lab: "No runs yet", then st.stop()
    assert not at.exception and "No runs yet" in page_text(at)
    assert len(opened) == 3
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("select 1")
    at.switch_page("app_pages/6_Settings.py").run()  # reads nothing: opens nothing
    assert not at.exception and len(opened) == 3


def test_the_page_connection_is_only_a_getter() -> None:
    """db() reaps nothing and serves only a page's render: outside one it says so."""
    from ui.common import db, render_db

    with pytest.raises(RuntimeError, match="app.py"):
        db()
    with render_db():
        assert db() is db()
