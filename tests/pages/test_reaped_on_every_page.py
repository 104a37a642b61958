"""Issue 22, Trust, on the pages (AppTest): only Home reaped, so a runner SIGKILLed after Home was
drawn left Runs and History showing its run `running` for ever. Each page now reaps first."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit as st

from store import connect, queries, repo
from tests.apptest import frame_with, open_page, page_text
from tests.factories import plan_attached
from tuning.engine.procs import process_start_time


@pytest.mark.parametrize("page_file", ["app_pages/2_Runs.py", "app_pages/5_History.py"])
def test_a_runner_killed_after_home_shows_failed_on_another_page(
    page_file: str, lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        exp_id = plan_attached(path, "concurrency", [1, 2])
        with connect(path) as db:
            run_id = repo.create_run(
                db, experiment_id=exp_id, seq=0, param="concurrency", value="1", status="running"
            )
            repo.update_experiment(
                db,
                exp_id,
                status="running",
                runner_pid=runner.pid,
                runner_start_time_s=process_start_time(runner.pid),
            )
        at = open_page(None)  # Home, while the runner lives: nothing to reap
        assert f"Running now: experiment {exp_id}" in page_text(at)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        at.switch_page(page_file).run()
        assert not at.exception, at.exception
        with connect(path, readonly=True) as db:
            assert queries.get_experiment(db, exp_id)["status"] == "failed"
            assert queries.get_run(db, run_id)["status"] == "failed"
        shown = frame_with(at, "status")
        assert "running" not in set(shown["status"]) and "failed" in set(shown["status"])
    finally:
        runner.kill()
        runner.wait()
        st.cache_data.clear()
        st.cache_resource.clear()
