"""Issue 23, item 1 in a real browser (Debian's chromium through Playwright), on a copy of the
committed H200 decisions example (no engine starts): Compare opens on the latest experiment with
two or more values (experiment 1, kv-cache-memory-bytes 1G vs 16G; experiments 2-7 are one-run
search steps), and at 1440x900 and at 1024x768 the headline decision is the first visible element
of the main area under the title and the selectors, and lies wholly inside the viewport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pages import no_exception
from tools.browser import REPO, serve_app, wait_idle
from tools.screenshots import copy_db

pytestmark = pytest.mark.browser
SNAPSHOT = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"
VIEWPORTS = ((1440, 900), (1024, 768))
SENTENCE_START = (
    "kv-cache-memory-bytes 16 GiB vs 1 GiB: objective output throughput +212.6 % (better)"
)

# In page order, every visible element of the main area (Streamlit's element containers and keyed
# blocks) that is neither the title, nor a selector, nor inside one of those: the first must be
# the headline.
FIRST_AFTER_SELECTORS = """() => {
    const main = document.querySelector("[data-testid='stMain']");
    const selectors = [".st-key-cmp_experiment", ".st-key-cmp_sides", ".st-key-cmp_margin"];
    const rows = selectors.map((s) => main.querySelector(s))
        .filter((e) => e)
        .map((e) => e.closest("[data-testid='stHorizontalBlock']") || e);
    const bottom = Math.max(...rows.map((e) => e.getBoundingClientRect().bottom));
    const kinds = "[data-testid='stElementContainer'], [class*='st-key-']";
    const shown = [...main.querySelectorAll(kinds)]
        .filter((e) => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.height > 0 && r.top >= bottom - 1;
        })
        .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
    const first = shown[0];
    return {
        selectorsBottom: bottom,
        first: first ? String(first.className).slice(0, 120) : null,
        firstInHeadline: first ? !!first.closest(".st-key-cmp_headline") : false,
        text: first ? first.innerText.slice(0, 200) : "",
    };
}"""


def test_compare_leads_with_the_headline_at_both_widths(browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
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
            headline = page.locator(".st-key-cmp_headline")
            expect(headline).to_be_visible(timeout=60_000)
            assert headline.inner_text().strip().startswith(SENTENCE_START), (width, height)
            try:  # the page may still be swapping elements in after its first paint
                page.wait_for_function(
                    f"() => ({FIRST_AFTER_SELECTORS})().firstInHeadline", timeout=30_000
                )
            except PlaywrightTimeout:
                pass  # the assert below says what came first instead
            found = page.evaluate(FIRST_AFTER_SELECTORS)
            assert found["firstInHeadline"], (width, height, found)
            box = headline.bounding_box()
            assert box is not None, (width, height)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, height, box)
            assert box["y"] >= found["selectorsBottom"] - 1, (width, height, box, found)
            assert box["y"] + box["height"] <= height, (width, height, box)  # no scrolling
            page.close()
    assert errors == [], errors[:3]
