"""Issue 23 item 4 (AppTest): byte counts read in binary units on New experiment and Compare:
'1 GiB', never '1073741824'."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from store import snapshot
from tests.apptest import frame_with, open_page, page_text, with_query
from tests.fakes.engines import fake_settings_env

DECISIONS = Path(__file__).resolve().parents[2] / "examples" / "h200" / "lab-h200-decisions.db.xz"
# A number of 100,000,000 or more, with or without separators: no time, rate or token count of
# these runs is that large, every byte count of them is.
HUGE = re.compile(r"(?<![\d.,])(?:\d{9,}|\d{3}(?:,\d{3}){2,})(?![\d])")


def huge_numbers(text: str) -> list[str]:
    return HUGE.findall(text)


def test_new_experiment_previews_byte_values_in_binary_units(
    lab_home: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**fake_settings_env(lab_home), "TUNING_LAB_ENGINE_MODEL": str(tiny_model)}
    env["TUNING_LAB_ENGINE_BACKEND"] = "cpu"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="new_param").set_value("kv-cache-memory-bytes").run()
    at.text_input(key="new_values").set_value("1 GiB, 512MiB, 2G").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    (preview,) = [c.value for c in at.caption if c.value.startswith("will run:")]
    assert [v.strip(" `") for v in preview.removeprefix("will run:").split("·")] == [
        "1 GiB",
        "512 MiB",
        "2 GiB",
    ]
    text = page_text(at)
    assert "Allowed: 1 B..1 PiB" in text and "e+15" not in text
    assert list(frame_with(at, "KV tokens")["kv-cache-memory-bytes"]) == [
        "1 GiB",
        "512 MiB",
        "2 GiB",
    ]
    assert huge_numbers(text) == []


@pytest.fixture
def decisions_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "lab-h200-decisions.db"
    shutil.copy(snapshot.expanded(DECISIONS), copy)  # the app opens DBs writable
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path))
    monkeypatch.setenv("TUNING_LAB_DB", str(copy))
    return copy


def test_compare_heads_its_sides_in_binary_units(decisions_db: Path) -> None:
    """Experiment 1 of the H200 decisions: kv-cache-memory-bytes 1G vs 16G, two runs a side."""
    at = open_page("app_pages/4_Compare.py", with_query("experiment", 1))
    assert not at.exception, at.exception
    text = page_text(at)
    # the recommendation's `vllm serve` line is a command to copy: it carries what vLLM parses
    # (bytes); every word the page shows a person is in binary units
    serve = [c.value for c in at.code if c.value.startswith("vllm serve")]
    assert serve and "--kv-cache-memory-bytes 17179869184" in serve[0]
    for line in serve:
        text = text.replace(line, "")
    assert "kv-cache-memory-bytes = 1 GiB" in text and "kv-cache-memory-bytes = 16 GiB" in text
    assert "1073741824" not in text and "17179869184" not in text
    assert huge_numbers(text) == []
