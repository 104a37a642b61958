"""Issue 40 item 4, the broken engine (AppTest): a custom engine whose interpreter has no vLLM
saved as "saved", Home showed no warning and Start stayed enabled. Now Save refuses it in one
line saying why (and writes nothing); settings edited by hand to such an engine are flagged on
Home and New experiment, where Start (and Start search) is off. Home's demo button shows only
when the embedded engine is installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.apptest import open_page, page_text
from tests.fakes.gpu_box import FAKE_VLLM_PKG, engine_vars
from tuning.settings import Settings, save_settings, settings_path


def shown(at: Any) -> str:
    return page_text(at).replace("\\", "")


@pytest.fixture
def no_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_home: Path) -> dict[str, str]:
    """A `vllm` script whose interpreter (this one, without the fake vllm package) has no vLLM,
    and one whose interpreter has the fake package; no embedded engine."""
    for name in engine_vars():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr("tuning.engine.embedded.ENGINE_DIR", tmp_path / "no-engine")
    broken = tmp_path / "broken" / "python"
    broken.parent.mkdir()
    broken.write_text(f'#!/bin/sh\nPYTHONPATH= exec {sys.executable} "$@"\n')
    broken.chmod(0o755)
    good = tmp_path / "good" / "python"
    good.parent.mkdir()
    good.write_text(f'#!/bin/sh\nPYTHONPATH={FAKE_VLLM_PKG} exec {sys.executable} "$@"\n')
    good.chmod(0o755)
    return {"broken": str(broken), "good": str(good)}


def test_save_refuses_an_interpreter_without_vllm_in_one_line(
    no_vllm: dict[str, str], terminal_token_issued: str
) -> None:
    at = open_page("app_pages/6_Settings.py")
    at.radio(key="set_engine").set_value("custom").run()
    at.text_input(key="set_command").set_value(no_vllm["broken"]).run()
    at.text_input(key="set_token").set_value(terminal_token_issued).run()
    at.text_input(key="set_model").set_value("org/model").run()
    at.button(key="set_save").click().run()
    assert not at.exception, at.exception
    (error,) = [e.value.replace("\\", "") for e in at.error]
    assert error.startswith("not saved: engine command: vllm does not import in "), error
    assert "vllm is not installed in this interpreter" in error and "\n" not in error
    assert not at.success and not settings_path().exists()
    at.text_input(key="set_command").set_value(no_vllm["good"]).run()
    at.text_input(key="set_token").set_value(terminal_token_issued).run()
    at.button(key="set_save").click().run()
    assert [s.value for s in at.success] == ["saved"]
    assert json.loads(settings_path().read_text())["engine_command"] == no_vllm["good"]


def test_home_and_new_experiment_flag_a_hand_edited_engine_and_start_is_off(
    no_vllm: dict[str, str],
) -> None:
    save_settings(Settings(engine="custom", engine_command=no_vllm["broken"], engine_model="m"))
    home = open_page(None)
    text = shown(home)
    assert "Your engine cannot start" in text and "vllm is not installed" in text
    assert any(link.label == "Fix it on Settings" for link in home.get("page_link"))
    new = open_page("app_pages/1_New_experiment.py")
    assert "Your engine cannot start, so Start is off" in shown(new)
    assert new.button(key="new_start").disabled
    new.radio(key="new_mode").set_value("search").run()
    assert new.button(key="srch_start").disabled


def test_a_working_custom_engine_is_not_flagged_and_start_is_on(
    no_vllm: dict[str, str],
) -> None:
    save_settings(Settings(engine="custom", engine_command=no_vllm["good"], engine_model="m"))
    assert "cannot start" not in shown(open_page(None))
    new = open_page("app_pages/1_New_experiment.py")
    assert "cannot start" not in shown(new)
    assert not new.button(key="new_start").disabled


def test_no_demo_button_without_the_embedded_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_home: Path
) -> None:
    for name in engine_vars():
        monkeypatch.delenv(name, raising=False)
    engine = tmp_path / "engine"
    monkeypatch.setattr("tuning.engine.embedded.ENGINE_DIR", engine)
    at = open_page(None)
    assert not [b for b in at.button if b.key == "demo"]
    text = shown(at)
    assert "NOT installed" in text and "The demo needs the embedded CPU engine" in text
    python = engine / "venv" / "bin" / "python"  # installed (`make setup`): the button is back
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    assert [b for b in open_page(None).button if b.key == "demo"]
