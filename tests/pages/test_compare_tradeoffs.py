"""Compare's trade-off views (AppTest): the Pareto front of the runs' workload with the
non-dominated runs listed, and metric vs value with its knee note and exports; drawn only once
their expander is opened (or a search link opens it)."""

from __future__ import annotations

from typing import Any

from store import connect, queries
from tests.apptest import frame_with, open_page, page_text
from tuning.present.charts.tradeoff import pareto_frame


def _download_keys(at: Any) -> set[str]:
    return {getattr(b, "key", None) or "" for b in at.get("download_button")}


def _open_tradeoffs(at: Any) -> None:
    at.session_state["cmp_tradeoffs"] = True  # the user unfolds the expander


def test_compare_page_draws_the_tradeoffs_only_when_unfolded(
    dashboard_lab: dict[str, Any],
) -> None:
    """Folded, the views cost nothing (no workload's runs read, no chart built)."""
    at = open_page("app_pages/4_Compare.py")
    assert any(e.label.startswith("Trade-offs") for e in at.expander)
    assert "cmp_pareto_fp" not in {s.key for s in at.selectbox}
    assert not {"dl_png_pareto", "dl_png_search"} & _download_keys(at)
    _open_tradeoffs(at)
    at.run()
    assert not at.exception, at.exception
    assert "cmp_pareto_fp" in {s.key for s in at.selectbox}
    assert {"dl_png_pareto", "dl_png_search"} <= _download_keys(at)


def test_compare_page_shows_the_pareto_front_and_metric_vs_value(
    dashboard_lab: dict[str, Any],
) -> None:
    at = open_page("app_pages/4_Compare.py", _open_tradeoffs)
    assert not at.exception, at.exception
    with connect(dashboard_lab["db"], readonly=True) as db:
        fingerprint = queries.load_runs(db, dashboard_lab["runs"][:1])[0]["workload_fingerprint"]
        ids = [r["id"] for r in queries.workload_runs(db, fingerprint, ())]
        runs = queries.load_runs(db, ids)  # whole runs: the page reads only a few columns
    assert at.selectbox(key="cmp_pareto_fp").value == fingerprint
    front = frame_with(at, "configuration")
    expected = pareto_frame(runs, "ttft")
    assert sorted(front["run"]) == sorted(expected.loc[expected["front"], "run"])
    assert 0 < len(front) <= len(runs)
    assert {"dl_png_pareto", "dl_html_pareto", "dl_png_search"} <= _download_keys(at)
    assert "knee: the last value before a step" in page_text(at)
    at.radio(key="cmp_pareto_view").set_value("per_user").run()
    assert not at.exception, at.exception
    assert len(frame_with(at, "configuration")) >= 1


def test_compare_page_names_a_missing_search(dashboard_lab: dict[str, Any]) -> None:
    def setup(at: Any) -> None:
        at.query_params["experiment"] = str(dashboard_lab["done_exp"])
        at.query_params["search"] = "99"

    at = open_page("app_pages/4_Compare.py", setup)
    assert not at.exception, at.exception
    assert "No search 99 in this lab." in page_text(at)
