"""Issue 40 item 4, words a user knows: the pages showed the store's keys (`waiting_health`,
`output_throughput`, None). Phases, metric keys and missing values go through ui/words.py, and
Home's running experiment and its latest runs read in words (AppTest)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store import connect, repo
from tests.apptest import open_page, page_text
from tests.factories import plan_attached
from tuning.engine.procs import process_start_time
from ui.words import failure_words, metric_words, or_dash, phase_words


def test_phases_metrics_and_nothing_read_as_words() -> None:
    assert phase_words("waiting_health") == "waiting for the server to answer"
    assert phase_words("warming_up") == "warming up"
    assert phase_words("some_new_phase") == "some new phase"
    assert phase_words(None) == "—" and or_dash(None) == "—" and or_dash(3) == "3"
    assert metric_words("output_throughput") == "output throughput"
    assert metric_words("mean_ttft_ms") == "mean TTFT"
    assert metric_words("not_a_metric") == "not a metric"


def test_home_says_the_phase_in_words_and_no_none(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    exp_id = plan_attached(path, "concurrency", [1, 2])
    with connect(path) as db:
        repo.create_run(
            db, experiment_id=exp_id, seq=0, param="concurrency", value=None, status="running"
        )
        repo.update_experiment(
            db,
            exp_id,
            status="running",
            phase="waiting_health",
            runner_pid=os.getpid(),  # a live runner: nothing to reap
            runner_start_time_s=process_start_time(os.getpid()),
        )
    at = open_page(None)
    text = page_text(at) + "\n".join(p.proto.text for p in at.get("progress"))
    assert "waiting for the server to answer" in text
    assert "waiting_health" not in text and "None" not in text


def test_failure_kinds_read_as_words() -> None:
    """Issue 40: a run's failure kind is a key of the runner (`out_of_memory`); pages say it in
    words, an unknown kind with spaces, any other text (an imported lab's) as it is."""
    assert failure_words("out_of_memory") == "out of memory"
    assert failure_words("runner_died") == "the lab's runner died"
    assert failure_words("new_kind") == "new kind"
    assert failure_words("__bold__ text") == "__bold__ text"
    assert failure_words(None) == "" and failure_words("") == ""
