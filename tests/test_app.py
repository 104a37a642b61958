"""The app's pages through Home.py on an empty lab and on edge cases: a queued experiment with no
run, a single-run experiment, and runs of two experiments with different parameters from a link."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store import connect
from tests.apptest import open_page, page_text, with_query
from tests.factories import add_experiment, add_run


@pytest.mark.parametrize("page", ["pages/3_Live.py", "pages/4_Compare.py", "pages/5_History.py"])
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
    at = open_page("pages/3_Live.py")  # the queued one is active, without a run yet
    assert not at.exception, at.exception
    at = open_page("pages/4_Compare.py", with_query("experiment", single))
    assert not at.exception, at.exception
    assert "No candidate side" in page_text(at)
    mixed = [dashboard_lab["runs"][0], dashboard_lab["runs"][1], only, dashboard_lab["live_done"]]
    at = open_page(
        "pages/4_Compare.py",
        with_query("runs", ",".join(map(str, mixed))),
    )
    assert not at.exception, at.exception
    at.multiselect(key="cmp_baseline_runs").set_value([]).run()
    assert not at.exception, at.exception
    assert "Pick at least one baseline run" in page_text(at)
