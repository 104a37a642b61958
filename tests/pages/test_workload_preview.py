"""The New experiment page's workload preview (AppTest on the seeded lab): synthetic traffic with
an arrival rate previews its request list; synthetic with no rate and no turns is the fixed-lengths
workload and offers no preview (it used to raise); opened first on an older lab, the page
migrates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page, page_text
from tools.browser import REPO
from tools.screenshots import copy_db
from ui.workload import SYNTHETIC


def test_synthetic_traffic_with_a_rate_is_previewed(
    dashboard_lab: dict[str, Any], lab_tokenizer: Path
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="wl_source").select(SYNTHETIC).run()
    at.number_input(key="wl_rate").set_value(4.0).run()
    at.button(key="wl_preview").click().run()
    assert not at.exception, at.exception
    assert "fingerprint" in page_text(at)
    assert [m.value for m in at.metric][:1] == ["64"]


def test_synthetic_traffic_without_rate_or_turns_is_the_fixed_workload(
    dashboard_lab: dict[str, Any],
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="wl_source").select(SYNTHETIC).run()
    assert not at.exception, at.exception
    assert not [b for b in at.button if b.key == "wl_preview"]
    assert "fixed-lengths workload above" in page_text(at)


def test_new_experiment_opened_first_on_an_older_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct link to New experiment on a lab DB from before saved workloads (the committed H200
    snapshot): the page migrates it instead of failing on the missing workloads table."""
    path = tmp_path / "lab.db"
    copy_db(REPO / "examples" / "h200" / "lab-h200.db.xz", path)
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path))
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    at = AppTest.from_file(str(REPO / "app_pages" / "1_New_experiment.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert SYNTHETIC in at.selectbox(key="wl_source").options
