"""The offline report in a real browser (Debian chromium through Playwright) with the network cut:
every chart draws (inline SVG with size and marks), and the page asks for nothing but itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.factories import seed_lab
from tuning.present.charts import kinds as ch
from tuning.present.report import write_report

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("offline-report")
    info = seed_lab(home / "lab.db", repeats=2)
    return write_report(
        home / "lab.db", home / "report.html", experiment_ids=[info["experiment_id"]]
    )


def _offline_page(browser: Any) -> tuple[Any, Any, dict[str, list[str]]]:
    """A page with the network cut twice over (offline, and every non-file:// request aborted),
    recording what it asked for and any console error (a CSP refusal is one)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_offline(True)
    seen: dict[str, list[str]] = {"requested": [], "blocked": [], "problems": []}

    def gate(route: Any) -> None:
        url = route.request.url
        if url.startswith("file://"):
            route.continue_()
        else:
            seen["blocked"].append(url)
            route.abort()

    context.route("**/*", gate)
    context.on("request", lambda req: seen["requested"].append(req.url))
    page = context.new_page()
    page.on(
        "console", lambda msg: seen["problems"].append(msg.text) if msg.type == "error" else None
    )
    page.on("pageerror", lambda exc: seen["problems"].append(str(exc)))
    return context, page, seen


def test_the_network_gate_catches_a_page_that_fetches(browser: Any, tmp_path: Path) -> None:
    """Control: the same harness sees a remote image, so a clean result below means something."""
    page_file = tmp_path / "fetches.html"
    page_file.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"></body></html>'
    )
    context, page, seen = _offline_page(browser)
    page.goto(page_file.as_uri(), wait_until="load")
    assert [u for u in seen["requested"] if not u.startswith("file://")]
    context.close()


def test_report_renders_its_charts_with_no_network(browser: Any, report: Path) -> None:
    context, page, seen = _offline_page(browser)
    page.goto(report.as_uri(), wait_until="load")
    figures = page.locator("figure.chart")
    assert figures.count() == len(ch.CHART_KINDS)
    svgs = page.locator("figure.chart svg")
    assert svgs.count() == len(ch.CHART_KINDS)
    for i in range(svgs.count()):
        svgs.nth(i).scroll_into_view_if_needed()
        box = svgs.nth(i).bounding_box()
        assert box is not None and box["width"] > 150 and box["height"] > 150, (i, box)
    marks = page.evaluate(
        "() => Array.from(document.querySelectorAll('figure.chart svg')).map(s => "
        "({kind: s.closest('figure').dataset.kind, marks: s.querySelectorAll("
        "'path, rect, line').length, text: s.querySelectorAll('text').length}))"
    )
    for chart in marks:
        assert chart["marks"] > 5 and chart["text"] > 3, chart
    assert page.locator("#metrics").is_visible()
    assert page.locator("#config-diff").is_visible()
    assert "worse" in page.locator("#verdicts").inner_text()
    shots = os.environ.get("TUNING_LAB_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / "report-offline.png"), full_page=True)
    assert [u for u in seen["requested"] if not u.startswith("file://")] == []
    assert seen["blocked"] == []
    assert seen["problems"] == []
    context.close()
