"""Settings changes the engine command only with the terminal's token (issue 41 case 11): the
engine command is a program the machine runs (Check engine runs its interpreter at once), and a
page reached through DNS rebinding changed it to a script that wrote a marker. Without the token
printed by `make run` (ui/terminal_token.py) nothing is saved or run and the page says why; with
it the change is saved and logged on stderr and in logs/settings.log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page
from tests.fakes.gpu_box import FAKE_VLLM_PKG, engine_vars
from tuning.settings import Settings, save_settings, settings_path
from ui import terminal_token


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_home: Path) -> Path:
    """An executable named `python` that leaves a marker when run (`<it>.ran`), then runs as
    this interpreter with the fake vllm package (Save asks a custom engine for its vLLM once the
    token approved it); the lab's saved engine is the embedded one."""
    for name in engine_vars():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM_PKG))
    script = tmp_path / "evil" / "python"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\ntouch "$0.ran"\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return script


def _enter(at: AppTest, command: Path) -> None:
    at.radio(key="set_engine").set_value("custom").run()
    at.text_input(key="set_command").set_value(str(command)).run()
    at.text_input(key="set_model").set_value("org/model").run()


def _log(lab_home: Path) -> str:
    path = lab_home / "logs" / "settings.log"
    return path.read_text() if path.exists() else ""


def test_without_a_token_the_command_is_neither_run_nor_saved(
    hostile: Path, lab_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    terminal_token.revoke()  # an app started without the launcher (bare `streamlit run`)
    at = open_page("app_pages/6_Settings.py")
    _enter(at, hostile)
    at.button(key="set_check").click().run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "not checked: terminal token: this app was started without one (start it with "
        "\\`make run\\`), or set TUNING\\_LAB\\_ENGINE\\_COMMAND in the terminal that "
        "starts the app"
    ]
    at.button(key="set_save").click().run()
    assert any(e.value.startswith("not saved: terminal token") for e in at.error)
    assert not at.success
    assert not Path(f"{hostile}.ran").exists()  # Check engine ran nothing
    assert not settings_path().exists()  # Save wrote nothing
    log = _log(lab_home)
    assert "settings check from the browser: engine_command '' -> " in log
    assert log.count(f"'{hostile}': refused (terminal token: this app was started") == 2
    assert f"'{hostile}': refused" in capfd.readouterr().err


def test_a_wrong_token_saves_nothing_and_the_right_one_saves_and_logs(
    hostile: Path, lab_home: Path, terminal_token_issued: str, capfd: pytest.CaptureFixture[str]
) -> None:
    at = open_page("app_pages/6_Settings.py")
    _enter(at, hostile)
    at.button(key="set_save").click().run()
    assert [e.value for e in at.error] == [
        "not saved: terminal token: empty; paste the token \\`make run\\` printed in its terminal"
    ]
    at.text_input(key="set_token").set_value(terminal_token_issued[:-1] + "x").run()
    at.button(key="set_save").click().run()
    assert [e.value for e in at.error] == [
        "not saved: terminal token: wrong; paste the one \\`make run\\` printed in its terminal"
    ]
    at.button(key="set_check").click().run()
    assert [e.value for e in at.error][0].startswith("not checked: terminal token: wrong")
    assert not settings_path().exists() and not Path(f"{hostile}.ran").exists()

    at.text_input(key="set_token").set_value(f" {terminal_token_issued} ").run()
    at.button(key="set_save").click().run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == ["saved"]
    saved = json.loads(settings_path().read_text())
    assert (saved["engine"], saved["engine_command"]) == ("custom", str(hostile))
    approved = f"settings save from the browser: engine_command '' -> '{hostile}': approved"
    assert approved in _log(lab_home)
    assert approved in capfd.readouterr().err
    Path(f"{hostile}.ran").unlink()  # approved, Save asked it for its vLLM
    at.button(key="set_check").click().run()  # the token lets Check engine run it too
    assert Path(f"{hostile}.ran").exists()
    assert "settings check from the browser: engine_command '' -> " in _log(lab_home)
    assert terminal_token_issued not in _log(lab_home)  # the token itself is never logged


def test_the_token_field_appears_only_for_a_new_command_and_other_fields_need_none(
    hostile: Path, lab_home: Path, terminal_token_issued: str
) -> None:
    save_settings(Settings(engine="custom", engine_command=str(hostile), engine_model="m"))
    at = open_page("app_pages/6_Settings.py")
    assert "set_token" not in {t.key for t in at.text_input}
    at.text_input(key="set_model").set_value("org/other").run()
    at.button(key="set_save").click().run()
    assert [s.value for s in at.success] == ["saved"]
    assert json.loads(settings_path().read_text())["engine_model"] == "org/other"
    at.text_input(key="set_command").set_value(f"{hostile} --evil").run()
    assert "set_token" in {t.key for t in at.text_input}
    assert _log(lab_home) == ""  # nothing guarded was changed, nothing to log


def test_the_cli_and_the_environment_need_no_token(
    hostile: Path, lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal_token.revoke()
    monkeypatch.setenv("TUNING_LAB_ENGINE", "custom")
    monkeypatch.setenv("TUNING_LAB_ENGINE_COMMAND", str(hostile))
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", "m")
    at = open_page("app_pages/6_Settings.py")
    assert at.text_input(key="set_command").value == str(hostile)
    assert "set_token" not in {t.key for t in at.text_input}  # the terminal set it
    at.button(key="set_save").click().run()
    assert [s.value for s in at.success] == ["saved"]
    assert json.loads(settings_path().read_text())["engine_command"] == str(hostile)
    assert _log(lab_home) == ""
