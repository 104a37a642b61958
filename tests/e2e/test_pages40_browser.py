"""Issue 40 item 4 in a real browser (Debian's chromium through Playwright) at 1440x900 and
1024x768, on copies of committed examples and a scratch lab (no engine starts):
- Compare on the memory-wall example (three values): the table's controls (candidate in view,
  differences only) show, the table lies inside the frame, and "Differences only" shortens it;
- Compare on the H100 cudagraph example: Server starts has its total row, the cache states in
  words and a chart whose legend fits inside the frame;
- Home and New experiment with a custom engine whose interpreter has no vLLM (settings written
  by hand): the refusal is on screen, there is no demo button, and Start is off."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pages import no_exception
from tools.browser import REPO, serve_app, wait_idle
from tools.screenshots import copy_db

pytestmark = pytest.mark.browser
WALL = REPO / "examples" / "h200" / "lab-h200-memory-wall.db.xz"
CUDAGRAPH = REPO / "examples" / "h200" / "lab-h100-cudagraph.db.xz"
VIEWPORTS = ((1440, 900), (1024, 768))


def _inside(page: Any, locator: Any, width: int) -> dict[str, float]:
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (width, box)
    return dict(box)


TABLE = ".st-key-cmp_table [data-testid='stDataFrame']"
# Glide's accessible table: the columns it draws, and how many rows the grid holds.
DRAWN = f"""() => [...document.querySelector("{TABLE}").querySelectorAll("[role='columnheader']")]
    .map((c) => c.innerText.trim())"""
ROWS = f"""() => Number(document.querySelector("{TABLE}").querySelector("[aria-rowcount]")
    ?.getAttribute("aria-rowcount") || 0)"""


def _drawn(page: Any) -> list[str]:
    for _ in range(40):  # the grid draws once it is in view
        if shown := page.evaluate(DRAWN):
            return [str(c) for c in shown]
        page.wait_for_timeout(250)
    return []


def _rows(page: Any) -> int:
    return int(page.evaluate(ROWS))


def _rows_below(page: Any, full: int) -> int:
    """The grid's rows once it has redrawn with fewer than `full` (a busy machine's rerun took
    over the 500 ms once waited: "assert 24 < 24" at 1024 wide), else what it holds after 30 s."""
    for _ in range(120):
        if (rows := _rows(page)) < full:
            return rows
        page.wait_for_timeout(250)
    return _rows(page)


def test_compare_wide_table_keeps_its_frame_and_shows_differences_only(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "lab"
    copy_db(WALL, home / "lab.db")
    with serve_app(home, tmp_path / "streamlit.log") as url:
        for width, height in VIEWPORTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{url}/Compare")
            wait_idle(page)
            no_exception(page)
            focus = page.locator(".st-key-cmp_focus")
            expect(focus).to_be_visible(timeout=60_000)
            expect(focus).to_contain_text("Candidate in view")
            grid = page.locator(".st-key-cmp_table [data-testid='stDataFrame']")
            _inside(page, grid, width)
            drawn = _drawn(page)
            # the candidate in view's value and verdict are drawn beside the metric (pinned)
            assert len(drawn) >= 3 and drawn[0] == "metric", (width, drawn)
            assert drawn[2] == f"verdict {drawn[1]}", (width, drawn)
            full = _rows(page)
            page.locator(".st-key-cmp_diff_only label").click()
            wait_idle(page)
            no_exception(page)
            assert 1 < _rows_below(page, full) < full, (width, full)
            page.close()


def test_compare_server_starts_reads_in_words_with_a_total(browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "lab"
    copy_db(CUDAGRAPH, home / "lab.db")
    with serve_app(home, tmp_path / "streamlit.log") as url:
        for width, height in VIEWPORTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{url}/Compare")
            wait_idle(page)
            no_exception(page)
            starts = page.locator(".st-key-cmp_startup")
            expect(starts).to_be_visible(timeout=60_000)
            starts.scroll_into_view_if_needed()
            expect(starts).to_contain_text("A miss compiled the model")
            chart = starts.locator("[data-testid='stVegaLiteChart']")
            expect(chart).to_be_visible(timeout=30_000)
            _inside(page, chart, width)
            legend = chart.locator("g.role-legend")  # Vega's legend group, drawn in SVG or canvas
            if legend.count():
                _inside(page, legend.first, width)
            page.close()


def test_a_custom_engine_without_vllm_is_flagged_and_start_is_off(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "lab"
    home.mkdir(parents=True)
    broken = tmp_path / "broken" / "python"
    broken.parent.mkdir()
    broken.write_text(f'#!/bin/sh\nPYTHONPATH= exec {sys.executable} "$@"\n')
    broken.chmod(0o755)
    (home / "settings.json").write_text(
        json.dumps({"engine": "custom", "engine_command": str(broken), "engine_model": "m"})
    )
    with serve_app(home, tmp_path / "streamlit.log") as url:
        for width, height in VIEWPORTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url)
            wait_idle(page)
            no_exception(page)
            main = page.locator("[data-testid='stMain']")
            expect(main).to_contain_text("Your engine cannot start", timeout=60_000)
            expect(main).to_contain_text("vllm is not installed in this interpreter")
            assert page.locator(".st-key-demo").count() == 0
            page.goto(f"{url}/New_experiment")
            wait_idle(page)
            no_exception(page)
            expect(page.locator("[data-testid='stMain']")).to_contain_text(
                "so Start is off", timeout=60_000
            )
            start = page.get_by_role("button", name="Start experiment")
            expect(start).to_be_disabled()
            _inside(page, start, width)
            page.close()
