"""The New experiment page's workload preview counts tokens with the configured model's tokenizer,
the same choice as `tuning-lab workload preview` (tuning.measure.traffic.tokenizer_choice): on a
GPU box (a custom engine, no embedded engine built) the model's own tokenizer.json, from its folder
or the Hugging Face cache; with none to be had, one st.error line naming the model and the fix, and
the rest of the page keeps working. It used to read only the embedded engine's tokenizer, so on a
GPU box every preview failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import tuning.engine.embedded as engine_module
from tests.apptest import open_page
from tests.tuning.cli.test_workload_preview_tokenizer import small_tokenizer
from tuning.cli.main import main

DATA = "chat-500.sharegpt.json"


@pytest.fixture
def gpu_page(
    dashboard_lab: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The seeded lab, its engine the user's vLLM (custom), no embedded engine built."""
    monkeypatch.setattr(engine_module, "ENGINE_DIR", tmp_path / "no-engine")
    monkeypatch.setenv("TUNING_LAB_ENGINE_DIR", str(tmp_path / "no-engine"))
    monkeypatch.setenv("TUNING_LAB_ENGINE", "custom")
    monkeypatch.setenv("TUNING_LAB_ENGINE_COMMAND", "/usr/bin/false")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return dashboard_lab


def _preview_page() -> AppTest:
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="wl_source").select(DATA).run()
    at.button(key="wl_preview").click().run()
    assert not at.exception, at.exception
    return at


def _counts(at: AppTest) -> tuple[str, str]:
    """(requests, input tokens) as the page shows them."""
    metrics = {m.label: m.value for m in at.metric}
    assert "Input tokens" in metrics, [e.value for e in at.error]
    return str(metrics["Requests"]), str(metrics["Input tokens"])


def _cli_counts(
    requests: str, tokenizer: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """The CLI's preview of the same requests with this tokenizer."""
    args = ["workload", "preview", "--dataset", f"workloads/{DATA}", "--num-requests", requests]
    assert main([*args, "--json", "--tokenizer", str(tokenizer)]) == 0, capsys.readouterr().err
    return requests, f"{json.loads(capsys.readouterr().out)['tokens']['input']:,}"


def test_the_custom_engines_local_model_tokenizer_counts_the_pages_tokens(
    gpu_page: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = small_tokenizer(tmp_path / "my-model")
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", str(model))
    at = _preview_page()
    assert not at.error, [e.value for e in at.error]
    requests, tokens = _counts(at)
    assert (requests, tokens) == _cli_counts(requests, model, capsys)


def test_a_hub_id_is_read_from_the_hugging_face_cache_on_the_page(
    gpu_page: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    local = small_tokenizer(tmp_path / "local")
    small_tokenizer(tmp_path / "hub" / "models--acme--tiny-chat" / "snapshots" / "0a1b2c")
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", "acme/tiny-chat")
    requests, tokens = _counts(_preview_page())
    assert (requests, tokens) == _cli_counts(requests, local, capsys)


@pytest.mark.parametrize("model", ["acme/not-downloaded", "/nowhere/model"])
def test_no_tokenizer_is_one_error_line_naming_the_model_and_the_fix(
    gpu_page: dict[str, Any], model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", model)
    at = _preview_page()
    errors = [e.value for e in at.error if "tokenizer" in e.value]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert errors[0].startswith(f"workload: no tokenizer for model {model}")
    assert "Model path or ID" in errors[0] and f"download {model} tokenizer.json" in errors[0]
    assert not at.metric  # no preview drawn, and the page goes on (the Start form is still there)
    assert [b for b in at.button if b.key == "wl_preview"]
