"""Issue 23 item 5 in a real browser: the Searches page on a copy of the H200 decisions lab (its
concurrency search recorded from its --json output) shows its decision (undecided: each value ran
once, issue 37 item 4) and draws the chart (with the SLO line) inside the viewport, at 1440x900 and
at 1024x768."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pages import no_exception
from tools.browser import REPO, serve_app, wait_idle
from tools.screenshots import copy_db
from tuning.decide.search.adopt import import_result

pytestmark = pytest.mark.browser
EXAMPLES = REPO / "examples" / "h200"


@pytest.mark.parametrize("width,height", [(1440, 900), (1024, 768)])
def test_searches_page_shows_the_choice_and_its_chart_in_view(
    browser: Any, tmp_path: Path, width: int, height: int
) -> None:
    home = tmp_path / "lab"
    copy_db(EXAMPLES / "lab-h200-decisions.db.xz", home / "lab.db")
    data = json.loads((EXAMPLES / "decisions-search.json").read_text())
    assert import_result(home / "lab.db", data) == 1
    errors: list[str] = []
    with serve_app(home, tmp_path / "streamlit.log") as url:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/Searches?search=1")
        wait_idle(page)
        no_exception(page)
        heading = page.get_by_text("concurrency: undecided (138 leads)", exact=True)
        heading.wait_for(timeout=30_000)
        assert heading.is_visible()
        box = heading.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, box  # above the fold
        # the chart itself (a 14 px icon svg inside the container is not it)
        chart = page.locator(".st-key-srchs_chart [data-testid='stVegaLiteChart']").first
        chart.wait_for(timeout=30_000)
        drawn = chart.bounding_box()
        assert drawn is not None and drawn["width"] > 300, drawn
        assert drawn["x"] >= 0 and drawn["x"] + drawn["width"] <= width, (drawn, width)
        # Streamlit's markdown typesets "<=" as "≤"
        shown = page.locator("[data-testid='stMain']").inner_text().replace("≤", "<=")
        assert "SLOs: p99 TTFT <= 1000 ms" in shown
        assert "Confirm: run 138 vs 16 with repeats until decided" in shown
    assert errors == [], errors[:3]
