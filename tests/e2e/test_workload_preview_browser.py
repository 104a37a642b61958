"""A real browser on the New experiment page's traffic section: pick the shipped chat dataset, set
an open-loop rate and turns, ask for the preview; its numbers and both length histograms show, and
no prompt text does. With TUNING_LAB_SCREENSHOTS=docs/screenshots the README's preview screenshot
is written there. Nothing is started: no engine runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.checks import png_size
from tools.browser import pick_option
from tools.browser import wait_idle as _idle

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def test_workload_preview(browser: Any, app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Path(os.environ.get("TUNING_LAB_SCREENSHOTS") or tmp_path / "shots")
    if not shots.is_absolute():
        shots = REPO / shots
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1200, "height": 2400})  # no inner scrolling
    page.goto(app_url + "/New_experiment")
    _idle(page)
    page.get_by_text("Real traffic: data file, request rate, conversations").click()
    section = page.locator("[data-testid='stSelectbox']").filter(has_text="Traffic")
    pick_option(page, section, page.get_by_role("option", name="chat-500.sharegpt.json"))
    _idle(page)
    for label, value in (
        ("Request rate (req/s, 0 = closed loop)", "4"),
        ("Max concurrency (0 = none)", "16"),
        ("Turns (0 = single requests)", "3"),
    ):
        box = page.get_by_label(label, exact=True)
        box.fill(value)
        box.press("Enter")
        _idle(page)
    page.get_by_role("button", name="Preview workload").click()
    _idle(page)
    expect(page.get_by_text("Conversations").first).to_be_visible(timeout=120_000)
    charts = page.locator("[data-testid='stVegaLiteChart']")
    expect(charts.nth(1)).to_be_visible(timeout=60_000)
    assert page.locator("[data-testid='stException']").count() == 0
    body = page.inner_text("body")
    assert "Reusable (prefix cache)" in body and "arrival: open" in body
    # Never a prompt's words: the dataset's first human turn does not appear.
    first = json.loads((REPO / "workloads" / "chat-500.sharegpt.json").read_text())
    assert first[0]["conversations"][0]["value"][:40] not in body
    target = shots / "workload-preview.png"
    metrics = page.locator("[data-testid='stMetric']").first
    page.wait_for_timeout(1500)  # let the charts finish drawing before the picture
    box = metrics.bounding_box()
    assert box is not None
    clip = {"x": box["x"] - 20, "y": max(0.0, box["y"] - 50), "width": 780, "height": 590}
    page.screenshot(path=str(target), clip=clip)
    width, height = png_size(target.read_bytes())
    assert width > 100 and height > 100
