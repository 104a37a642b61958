"""Issue 25 item 4 in the UI (AppTest, stored runs built here, no engine): Compare shows the
recommendation to keep vLLM's default, and New experiment's picker marks a flag inert on a stored
workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apptest import open_page, page_text
from tests.factories import add_measured_experiment
from tests.fakes.engines import fake_settings_env

FLAT = {"output_throughput": [1000.0, 1003.0, 998.0], "mean_ttft_ms": [100.0, 100.4, 99.7]}
SAME = {"output_throughput": [1001.0, 999.0, 1002.0], "mean_ttft_ms": [100.0, 100.2, 99.9]}


def test_compare_shows_keep_the_default(fresh_db: Path) -> None:
    add_measured_experiment(fresh_db, "enable-prefix-caching", {True: FLAT, False: SAME})
    at = open_page("app_pages/4_Compare.py")
    assert not at.exception, at.exception
    text = page_text(at)
    assert (
        "Decision: Keep vLLM's default enable-prefix-caching = true (the lab's table)"
        in text.replace("*", "").replace("\\", "")
    )


def test_the_picker_marks_an_inert_flag(
    fresh_db: Path, lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    add_measured_experiment(fresh_db, "block-size", {16: FLAT, 32: SAME})
    at = open_page("app_pages/1_New_experiment.py")
    options = at.selectbox(key="new_param").options
    assert "block-size · curated (int) · inert on a stored workload" in options
    assert "max-num-seqs · curated (int)" in options  # never judged: no badge
    at.selectbox(key="new_param").set_value("block-size").run()
    assert not at.exception, at.exception
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(
        c.startswith(
            "Inert on workload fp-a (24 requests, concurrency 8, 64 in / 16 out): "
            "values 16, 32 all equivalent (experiment 1)"
        )
        for c in captions
    ), captions
