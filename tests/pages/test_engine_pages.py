"""The engine on Settings and Home (AppTest; issue 21 item 4) on a simulated GPU box: Settings'
"Check engine" draws a status card naming the vLLM it found (never raw JSON), a command that does
not exist is not saved, and Home shows the engine in use, never the CPU demo or `make setup` advice
for a custom engine."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.apptest import open_page, page_text
from tests.fakes.fake_nvml import FakeNvml
from tests.fakes.gpu_box import FAKE_VLLM_PKG, engine_vars, vllm_shim
from tuning.settings import Settings, save_settings, settings_path


def shown(at: Any) -> str:
    """The page's words as read (Markdown escapes removed)."""
    return page_text(at).replace("\\", "")


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_home: Path) -> dict[str, Any]:
    """A `vllm` shim on PATH, the fake vllm package for its interpreter, NVML with 2 GPUs, and a
    local model folder with its config.json."""
    for name in engine_vars():
        monkeypatch.delenv(name, raising=False)
    shim = vllm_shim(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM_PKG))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(devices=2))
    monkeypatch.setattr(
        "tuning.engine.embedded.ENGINE_DIR", tmp_path / "no-engine"
    )  # a fresh clone
    model = tmp_path / "models" / "Qwen3-8B"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    return {"shim": str(shim), "model": str(model)}


def test_check_engine_shows_the_vllm_found_in_a_status_card(
    box: dict[str, Any], terminal_token_issued: str
) -> None:
    at = open_page("app_pages/6_Settings.py")
    at.radio(key="set_engine").set_value("custom").run()
    at.text_input(key="set_command").set_value(f"{box['shim']} serve").run()
    at.text_input(key="set_token").set_value(terminal_token_issued).run()
    at.text_input(key="set_model").set_value(box["model"]).run()
    at.button(key="set_check").click().run()
    assert not at.exception, at.exception
    text = shown(at)
    assert "Engine check: ready" in text
    assert f"vllm 0.32.0+fake in {sys.executable}" in text
    assert "2 visible" in text and "driver 550.54.15" in text
    assert "config.json readable" in text
    assert not at.json  # a plain card, not a raw JSON dump
    assert not settings_path().exists()  # checking saves nothing


def test_check_engine_on_the_embedded_engine_says_a_vllm_was_found(box: dict[str, Any]) -> None:
    at = open_page("app_pages/6_Settings.py")
    at.button(key="set_check").click().run()
    assert not at.exception, at.exception
    text = shown(at)
    assert "found on this machine (PATH): vLLM 0.32.0+fake" in text and box["shim"] in text


def test_a_command_that_does_not_exist_is_not_saved_and_says_how_to_fix_it(
    box: dict[str, Any], terminal_token_issued: str
) -> None:
    at = open_page("app_pages/6_Settings.py")
    at.radio(key="set_engine").set_value("custom").run()
    at.text_input(key="set_command").set_value("/opt/vllm/bin/vllm serve").run()
    at.text_input(key="set_token").set_value(terminal_token_issued).run()
    at.text_input(key="set_model").set_value(box["model"]).run()
    at.button(key="set_save").click().run()
    errors = [e.value for e in at.error]
    gone = "not saved: engine command: /opt/vllm/bin/vllm not found"
    assert errors and errors[0].startswith(gone)
    assert "which vllm" in errors[0]
    assert not at.success and not settings_path().exists()
    at.text_input(key="set_command").set_value(f"{box['shim']} serve").run()
    at.button(key="set_save").click().run()
    assert [s.value for s in at.success] == ["saved"]
    assert json.loads(settings_path().read_text())["engine_command"] == f"{box['shim']} serve"


def test_home_shows_the_custom_engine_in_use_without_the_cpu_demo(box: dict[str, Any]) -> None:
    save_settings(
        Settings(engine="custom", engine_command=f"{box['shim']} serve", engine_model=box["model"])
    )
    at = open_page(None)
    text = shown(at)
    assert "custom" in text and "vLLM 0.32.0+fake" in text
    assert box["model"] in text and "Qwen3-8B" in text  # the served name, from the model
    assert not [b for b in at.button if b.key == "demo"]
    assert "make setup" not in text and "embedded" not in text.lower()


def test_home_for_a_missing_custom_engine_says_what_is_missing_and_points_to_settings(
    box: dict[str, Any],
) -> None:
    save_settings(
        Settings(engine="custom", engine_command="/opt/vllm/bin/vllm serve", engine_model="m")
    )
    at = open_page(None)
    text = shown(at)
    assert "Your vLLM was not found" in text and "/opt/vllm/bin/vllm serve" in text
    assert "make setup" not in text and not [b for b in at.button if b.key == "demo"]
    assert any(link.label == "Fix it on Settings" for link in at.get("page_link"))
    save_settings(Settings(engine="custom", engine_command="", engine_model=""))
    text = shown(open_page(None))
    assert "Your engine is incomplete" in text and "Settings" in text
