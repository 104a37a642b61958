"""A `suspect` run (issue 41, item 3) on the pages (AppTest): Runs says why it is suspect; Compare
leaves it out of the verdicts with the words, and counts it only when the box is ticked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st

from store import connect, repo
from tests.apptest import open_page, page_text
from tests.factories import seed_clean_lab

WHY = (
    "4 of 4 requests had a usage that cannot be true, so their tokens are not counted; first: "
    "server's usage says 1,000,000,000 output tokens for a stream of 3 chunks"
)


@pytest.fixture
def suspect_lab(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """max-num-seqs = 2, 16 twice each; run 16's second repeat is suspect (1e11 tok/s)."""
    path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    info = seed_clean_lab(path, values=(2, 16), repeats=2)
    rid = info["run_ids"][3]
    with connect(path) as db:
        health = json.loads(db["runs"].get(rid)["health_json"] or "{}")
        repo.update_run(
            db,
            rid,
            status="suspect",
            output_throughput=1e11,
            health_json=json.dumps({**health, "suspect": [WHY]}),
        )
    yield {"experiment": info["experiment_id"], "run": rid}
    st.cache_data.clear()
    st.cache_resource.clear()


def test_runs_page_says_why_a_run_is_suspect(suspect_lab: dict[str, int]) -> None:
    at = open_page("app_pages/2_Runs.py")
    assert not at.exception, at.exception
    labels = [e.label for e in at.expander]
    assert f"run {suspect_lab['run']} suspect: not counted in verdicts" in labels
    text = page_text(at)
    assert "1,000,000,000 output tokens for a stream of 3 chunks" in text


def test_compare_leaves_a_suspect_run_out_unless_it_is_ticked(
    suspect_lab: dict[str, int],
) -> None:
    def setup(at: object) -> None:
        at.query_params["experiment"] = str(suspect_lab["experiment"])  # type: ignore[attr-defined]

    at = open_page("app_pages/4_Compare.py", setup)
    assert not at.exception, at.exception
    text = page_text(at)
    assert f"Suspect runs, not counted in the verdicts: run {suspect_lab['run']}: " in text
    assert "1e+11" not in text and "100,000,000,000" not in text  # its throughput not shown
    at.checkbox(key="cmp_include_suspect").check().run()
    assert not at.exception, at.exception
    text = page_text(at)
    assert "Counted although suspect (included by choice)" in text
