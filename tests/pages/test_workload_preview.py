"""The New experiment page's workload preview (AppTest on the seeded lab): synthetic traffic with
an arrival rate previews its request list; synthetic with no rate and no turns is the fixed-lengths
workload and offers no preview (it used to raise)."""

from __future__ import annotations

from typing import Any

from tests.apptest import open_page, page_text
from ui.workload import SYNTHETIC


def test_synthetic_traffic_with_a_rate_is_previewed(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("pages/1_New_experiment.py")
    at.selectbox(key="wl_source").select(SYNTHETIC).run()
    at.number_input(key="wl_rate").set_value(4.0).run()
    at.button(key="wl_preview").click().run()
    assert not at.exception, at.exception
    assert "fingerprint" in page_text(at)
    assert [m.value for m in at.metric][:1] == ["64"]


def test_synthetic_traffic_without_rate_or_turns_is_the_fixed_workload(
    dashboard_lab: dict[str, Any],
) -> None:
    at = open_page("pages/1_New_experiment.py")
    at.selectbox(key="wl_source").select(SYNTHETIC).run()
    assert not at.exception, at.exception
    assert not [b for b in at.button if b.key == "wl_preview"]
    assert "fixed-lengths workload above" in page_text(at)
