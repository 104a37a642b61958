"""The Compare page (AppTest) on the seeded dashboard lab: the latest done experiment by default,
runs from a link with an SLO, and the baseline switch."""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1 import AppTest

from tests.apptest import frame_with, frames, open_page, page_text


def test_compare_page_defaults_to_latest_done_experiment(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_experiment").value == dashboard_lab["done_exp"]
    text = page_text(at)
    assert "Comparability" in text and "other-box" in frames(at)
    assert "pre-allocates the KV cache" in text
    base = at.multiselect(key=f"cmp_baseline_exp{dashboard_lab['done_exp']}").value
    assert sorted(base) == sorted(dashboard_lab["runs"][0::3])  # the first value's runs
    table = frame_with(at, "metric")
    assert "verdict 16" in table.columns and "2 (baseline)" in table.columns
    assert "TPOT = (E2EL − TTFT) / (output tokens − 1)" in text
    for key in (
        "dl_png_throughput",
        "dl_svg_latency",
        "dl_html_cdf",
        "dl_csv_table",
        "dl_json_table",
        "dl_png_memory",
        "dl_png_kv",
        "dl_png_knee",
    ):
        assert at.get("download_button") and any(
            getattr(b, "key", None) == key for b in at.get("download_button")
        ), key


def test_compare_page_with_runs_from_link_and_slo(dashboard_lab: dict[str, Any]) -> None:
    ids = dashboard_lab["runs"][:6]

    def setup(at: AppTest) -> None:
        at.query_params["runs"] = ",".join(map(str, ids))
        at.session_state["cmp_slo_ttft"] = 1000.0

    at = open_page("app_pages/4_Compare.py", setup)
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_experiment").value is None
    table = frame_with(at, "metric")
    assert any("goodput" in str(m) for m in table["metric"])


def test_compare_page_baseline_switch_flips_roles(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py")
    key = f"cmp_baseline_exp{dashboard_lab['done_exp']}"
    sixteen = [dashboard_lab["runs"][1], dashboard_lab["runs"][4]]
    at.multiselect(key=key).set_value(sixteen).run()
    assert not at.exception, at.exception
    table = frame_with(at, "metric")
    assert "16 (baseline)" in table.columns
