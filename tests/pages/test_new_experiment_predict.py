"""Issue 13, item 3 on New experiment (AppTest): the KV cache each value would get is shown before
anything starts, and a value that cannot start is flagged with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apptest import frame_with, open_page, page_text
from tests.fakes.engines import fake_settings_env


def test_new_experiment_shows_the_predicted_kv_cache(
    lab_home: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**fake_settings_env(lab_home), "TUNING_LAB_ENGINE_MODEL": str(tiny_model)}
    env["TUNING_LAB_ENGINE_BACKEND"] = "cpu"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="new_param").set_value("kv-cache-memory-bytes").run()
    at.text_input(key="new_values").set_value("2M,1G").run()
    assert not at.exception, at.exception
    text = page_text(at)
    assert "Predicted KV cache" in text
    frame = frame_with(at, "KV tokens")
    assert list(frame["KV tokens"]) == [1024, 524288]
    assert list(frame["starts"]) == ["no", "yes"]
    errors = [e.value for e in at.error]
    assert any("cannot start" in e and "less than one request" in e for e in errors)
