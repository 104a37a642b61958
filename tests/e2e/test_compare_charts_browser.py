"""Issue 37 item 8 in a real browser (Debian's chromium through Playwright), on a copy of the
committed H200 decisions lab (no engine starts): at 1440x900 and at 1024x768 Compare's first
chart, "Output throughput per value", draws a bar per side, taller than a sliver, and its y axis
with its numbers; every chart's drawing fits its box; and every chart's own export is not blank:
the toolbar's "Download as PNG" (Vega's drawing of the page's chart) at both widths, and the
lab's PNG button (vl-convert, the same file whatever the window) once.

Streamlit gave a single or layered chart without `autosize` its "fit", which squeezed the title,
subtitle and axes into the plot's own 260 px: the throughput plot came out 0 px tall, with no
bars and no axis, and the toolbar's PNG of it showed neither."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pages import no_exception
from tools.browser import REPO, serve_app, wait_idle
from tools.screenshots import copy_db

pytestmark = pytest.mark.browser
SNAPSHOT = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"
VIEWPORTS = ((1440, 900), (1024, 768))
KINDS = ("throughput", "latency", "knee", "cdf", "memory", "kv")
SIDES = {"#0068c9", "#83c9ff"}  # the baseline's and the candidate's colour (charts.common.PALETTE)
# A file is blank when it holds almost no coloured pixel: the marks are the sides' colours, the
# text and grid are greys and black.
MIN_COLOURED = 400

FIRST_CHART = """() => {
    const svg = document.querySelector(".st-key-cmp_chart_throughput svg.marks");
    if (!svg) return null;
    const bars = [...svg.querySelectorAll("g.mark-rect.layer_0_marks path")].map((p) => ({
        fill: p.getAttribute("fill"), height: p.getBBox().height, width: p.getBBox().width}));
    const yAxis = [...svg.querySelectorAll("g.role-axis")]
        .find((g) => (g.getAttribute("aria-label") || "").startsWith("Y-axis"));
    const labels = yAxis
        ? [...yAxis.querySelectorAll("g.role-axis-label text")].map((t) => t.textContent) : [];
    return {bars, labels, plotHeight: yAxis ? yAxis.getBBox().height : 0};
}"""
DRAWN_WIDTHS = """() => [...document.querySelectorAll("[class*='st-key-cmp_chart_']")]
  .map((box) => {
    const chart = box.querySelector("[data-testid='stVegaLiteChart']");
    const svg = chart ? chart.querySelector("svg.marks") : null;
    return [box.className.match(/st-key-cmp_chart_\\w+/)[0],
            chart ? chart.getBoundingClientRect().width : 0, svg ? svg.getBBox().width : 0];
})"""


def coloured_pixels(png: bytes) -> int:
    """Pixels whose channels differ by more than 40 (a mark's colour; not a grey or black)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width > 100 and image.height > 100, image.size
    return sum(1 for r, g, b in image.getdata() if max(r, g, b) - min(r, g, b) > 40)


def download(page: Any, button: Any) -> bytes:
    with page.expect_download(timeout=60_000) as got:
        button.click()
    path = got.value.path()
    assert path is not None
    return Path(path).read_bytes()


def test_compare_charts_draw_their_marks_and_export_them(browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "lab"
    copy_db(SNAPSHOT, home / "lab.db")
    errors: list[str] = []
    with serve_app(home, tmp_path / "streamlit.log") as url:
        for width, height in VIEWPORTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{url}/Compare")
            wait_idle(page)
            no_exception(page)
            first = page.locator(".st-key-cmp_chart_throughput")
            expect(first.locator("svg.marks")).to_be_visible(timeout=60_000)
            first.scroll_into_view_if_needed()
            page.wait_for_function(f"() => ({FIRST_CHART})() !== null", timeout=30_000)
            drawn = page.evaluate(FIRST_CHART)
            bars = {b["fill"]: b for b in drawn["bars"]}
            assert set(bars) == SIDES, (width, drawn)
            assert all(b["height"] > 20 and b["width"] > 20 for b in bars.values()), (width, drawn)
            assert drawn["plotHeight"] >= 200, (width, drawn)  # the plot's own 260 px, about
            numbers = [x for x in drawn["labels"] if x.replace(",", "").isdigit()]
            assert len(numbers) >= 3 and "0" in numbers, (width, drawn["labels"])
            for kind in KINDS:
                box = page.locator(f".st-key-cmp_chart_{kind}")
                box.scroll_into_view_if_needed()
                chart = box.locator("[data-testid='stVegaLiteChart']")
                expect(chart.locator("svg.marks")).to_be_visible(timeout=30_000)
                chart.hover()
                button = box.get_by_role("button", name="Download as PNG")
                png = download(page, button)
                assert coloured_pixels(png) >= MIN_COLOURED, (width, kind, "toolbar PNG blank")
                if width == VIEWPORTS[0][0]:  # the lab's own export: vl-convert, any window
                    own = box.get_by_role("button", name="PNG", exact=True)
                    assert coloured_pixels(download(page, own)) >= MIN_COLOURED, (kind, "PNG")
            for key, box_px, drawn_px in page.evaluate(DRAWN_WIDTHS):
                assert drawn_px <= box_px + 4, (width, key, box_px, drawn_px)  # nothing cut
            page.close()
    assert errors == [], errors[:3]
