"""Issue 13, item 7 on the Runs page (AppTest): a selected run's findings with the next
experiment, and one click plans it from the run and starts its runner (spawn recorded here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

import ui.findings
from store import connect, queries, repo
from tests.apptest import open_page, page_text
from tests.factories import seed_clean_lab


def test_runs_page_shows_findings_and_queues_the_next_experiment(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    info = seed_clean_lab(path, values=(4,), repeats=1)
    rid = info["run_ids"][0]
    with connect(path) as db:
        repo.update_run(db, rid, preemptions=9)
    spawned: list[int] = []
    monkeypatch.setattr(ui.findings, "spawn_runner", lambda db, exp_id: spawned.append(exp_id))
    try:
        at = open_page("app_pages/2_Runs.py")
        text = page_text(at)
        assert f"Findings for run {rid}" in text and "KV-cache pressure" in text
        assert "9 preemptions" in text and "tuning-lab experiment --param max-num-seqs" in text
        at.button(key="runs_findings-0-1").click().run()  # fewer max-num-seqs: 4, 2
        assert not at.exception, at.exception
        (exp_id,) = spawned
        assert f"Experiment {exp_id} started" in page_text(at)
        with connect(path, readonly=True) as db:
            planned = queries.get_experiment(db, exp_id)
        assert planned["param"] == "max-num-seqs" and planned["values"] == [4, 2]
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
