"""The History page's sharing section, in AppTest: the team folder listed, "import new", publish."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from store.bundle import SUFFIX


def _sharing_app() -> None:
    import os
    from pathlib import Path

    from ui.share import render_sharing

    render_sharing(Path(os.environ["TUNING_LAB_DB"]))


def test_render_sharing_lists_and_imports(
    team: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    team["publish_bob"]()
    monkeypatch.setenv("TUNING_LAB_DB", str(team["ada"]))
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", str(team["folder"]))
    at = AppTest.from_function(_sharing_app, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["author"]) == ["bob"] and list(table["state"]) == ["new"]
    assert int(table["runs"].iloc[0]) == 4
    button = at.button(key="share_import_new")
    assert "Import new (1)" in button.label and not button.disabled
    button.click().run()
    assert not at.exception, at.exception
    assert any("imported 4 run(s)" in s.value for s in at.success)
    assert list(at.dataframe[0].value["state"]) == ["imported"]
    assert at.button(key="share_import_new").disabled
    at.multiselect(key="share_experiments").select(team["ada_info"]["experiment_id"]).run()
    assert not at.button(key="share_publish").disabled
    at.button(key="share_publish").click().run()
    assert any("published ada-" in s.value or "published " in s.value for s in at.success)
    assert len(list(team["folder"].glob(f"*{SUFFIX}"))) == 2


def test_render_sharing_without_a_team_folder(
    team: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNING_LAB_DB", str(team["ada"]))
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", "")
    at = AppTest.from_function(_sharing_app, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert any("No team folder set" in i.value for i in at.info)
    assert at.button(key="share_publish").disabled
