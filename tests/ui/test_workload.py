"""The New experiment page's traffic section, in AppTest: classic by default, a shipped file at a
request rate makes a spec, its preview shows counts and histograms, a bad choice is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest


def _section_app() -> None:
    import json
    import os
    from pathlib import Path

    import streamlit as st

    from ui.workload import traffic_section

    classic = dict(
        num_requests=12, concurrency=2, input_len=16, output_len=4, shared_prefix_len=0, seed=0
    )
    spec, errors = traffic_section(Path(os.environ["TUNING_LAB_DB"]), classic, "concurrency")
    st.code(json.dumps({"spec": spec.to_dict() if spec else None, "errors": errors}))


def result(at: AppTest) -> dict:  # type: ignore[type-arg]
    assert not at.exception, at.exception
    return dict(json.loads(at.code[-1].value))


@pytest.fixture
def app(fresh_db: Path, monkeypatch: pytest.MonkeyPatch, lab_tokenizer: Path) -> AppTest:
    monkeypatch.setenv("TUNING_LAB_DB", str(fresh_db))
    at = AppTest.from_function(_section_app, default_timeout=120)
    at.run()
    return at


def test_classic_by_default_then_a_file_at_a_rate(app: AppTest) -> None:
    assert result(app) == {"spec": None, "errors": []}
    app.selectbox(key="wl_source").set_value("prompts-40.jsonl").run()
    app.number_input(key="wl_rate").set_value(5.0).run()
    app.number_input(key="wl_cap").set_value(3).run()
    spec = result(app)["spec"]
    assert spec["source"]["kind"] == "jsonl" and spec["num_requests"] == 12
    assert spec["arrival"] == {**spec["arrival"], "kind": "open", "rate": 5.0, "max_concurrency": 3}
    app.button(key="wl_preview").click().run()
    assert not app.exception, app.exception
    assert [m.value for m in app.metric][:2] == ["12", "12"]
    assert any("fingerprint" in c.value for c in app.caption)


def test_a_file_without_conversations_and_turns_is_an_error(app: AppTest) -> None:
    app.selectbox(key="wl_source").set_value("prompts-40.csv").run()
    app.number_input(key="wl_turns").set_value(2).run()
    out = result(app)
    assert out["spec"] is None and "multi_turn off" in out["errors"][0]
