"""The Live page (AppTest) on the seeded dashboard lab: the active experiment with its log and
progress, the stop button, the final state when nothing runs, and ?experiment= from a link."""

from __future__ import annotations

from typing import Any

from core.clock import now_iso
from store import connect, open_db, queries, repo
from tests.apptest import open_page, page_text, with_query


def test_live_page_shows_active_experiment(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/3_Live.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="live_experiment").value == dashboard_lab["live_exp"]
    text = page_text(at)
    assert "live-log-marker" in text
    assert "sending the workload" in text  # the phase `loading`, in words
    assert at.button(key="live_stop")
    progress = [p.value for p in at.get("progress")]
    assert progress, "progress bars"
    at.button(key="live_stop").click().run()
    assert not at.exception, at.exception
    db = open_db(dashboard_lab["db"])
    assert queries.cancel_requested(db, dashboard_lab["live_exp"])
    # a second poll (what run_every does in the browser) still renders from the DB alone
    at.run()
    assert not at.exception, at.exception


def test_live_page_final_state_when_nothing_runs(dashboard_lab: dict[str, Any]) -> None:
    with connect(dashboard_lab["db"]) as db:
        repo.update_experiment(
            db,
            dashboard_lab["live_exp"],
            status="cancelled",
            phase="cancelled",
            finished_at=now_iso(),
        )
    at = open_page("app_pages/3_Live.py")
    assert not at.exception, at.exception
    text = page_text(at)
    assert "cancelled" in text
    assert not [b for b in at.button if getattr(b, "key", None) == "live_stop"]


def test_live_page_query_param_picks_experiment(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/3_Live.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    assert at.selectbox(key="live_experiment").value == dashboard_lab["done_exp"]


def test_the_log_tail_leaves_out_the_access_lines() -> None:
    """Issue 23 (smaller): under load a server log's tail is all HTTP access lines; Live shows the
    rest and says how many it left out."""
    from ui.live import without_access_lines

    log = "\n".join(
        [
            'INFO:     127.0.0.1:52310 - "POST /v1/completions HTTP/1.1" 200 OK',
            "(APIServer pid=12) INFO [loggers.py:123] Engine 000: Avg prompt throughput: 9.1",
            'INFO:     127.0.0.1:52311 - "GET /metrics HTTP/1.1" 200 OK',
        ]
    )
    kept, dropped = without_access_lines(log)
    assert kept == "(APIServer pid=12) INFO [loggers.py:123] Engine 000: Avg prompt throughput: 9.1"
    assert dropped == 2
