"""Issue 25: the server's start as phases, on Live (a timeline with a line of words) and on
Compare (one row per phase, each side's mean seconds, and the compile-cache states)."""

from __future__ import annotations

from typing import Any

from store import connect, queries, repo
from tests.apptest import open_page, page_text, with_query
from tuning.engine.startup_anatomy import anatomy

COLD = (  # vLLM's own lines (their prefix names the process): the only ones the lab reads
    "(EngineCore pid=7) INFO Compiling a graph for compile range (1, 8192) takes 8.08 s\n"
    "(EngineCore pid=7) INFO torch.compile took 12.59 s in total"
)
STAMPS = {"api_process": 3.0, "engine_process": 9.0, "compile": 21.0, "kv_cache": 23.0}


def _give_anatomy(dashboard_lab: dict[str, Any]) -> None:
    with connect(dashboard_lab["db"]) as db:
        for i, rid in enumerate(dashboard_lab["runs"]):
            run = queries.get_run(db, rid)
            anat = anatomy(STAMPS, 30.0 + i, COLD)
            repo.update_run(db, rid, startup_json={**(run.get("startup") or {}), "anatomy": anat})


def test_live_shows_a_finished_runs_start_as_phases(dashboard_lab: dict[str, Any]) -> None:
    _give_anatomy(dashboard_lab)
    at = open_page("app_pages/3_Live.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    text = page_text(at)
    assert "healthy after" in text and "torch.compile 12.0 s" in text
    assert "compile cache: miss" in text


def test_compare_has_a_row_per_phase_of_the_start(dashboard_lab: dict[str, Any]) -> None:
    _give_anatomy(dashboard_lab)
    at = open_page("app_pages/4_Compare.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    assert "Server starts" in page_text(at)
    frame = next(d.value for d in at.dataframe if "phase" in d.value.columns)
    phases = list(frame["phase"])
    assert phases[:3] == [
        "API server up (imports, arguments)",
        "engine core started",
        "torch.compile",
    ]
    assert phases[-1] == "compile cache" and all(c.startswith("miss") for c in frame.iloc[-1, 1:])
    assert frame.iloc[0, 1] == "3.0 s"  # API server up after 3 s in every run


def test_compare_without_anatomies_has_no_start_rows(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py", with_query("experiment", dashboard_lab["done_exp"]))
    assert not at.exception, at.exception
    assert "Server starts" not in page_text(at)
