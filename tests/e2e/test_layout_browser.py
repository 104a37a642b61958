"""Issue 23 item 7 in a real browser: every page of a lab of real runs (the committed H200 decisions
lab with its concurrency search) at 1440x900 and at 1024x768 (the sidebar open: a 564 px main
column): no exception, no emoji; every table, chart, metric, heading and button lies inside the
viewport; no button, heading, tab or expander title is cut to "…"; the Runs table shows the run
and its numbers before anything scrolls, History its tags and notes, and Compare's side-by-side
table the first candidate's change and whole verdict (Glide's grid lists in its accessible table
only the columns it draws, so the column after the verdict being listed means the verdict's right
edge is inside the table); every verdict cell is drawn within its column; no raw byte count of
the lab's bytes-typed values and no change or interval end below -100 % in what any page shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.checks import below_minus_100
from tests.e2e.pages import PAGES, assert_verdicts_fit, no_exception
from tests.pages.test_icons import EMOJI
from tools.browser import REPO, serve_app, wait_idle
from tools.screenshots import copy_db
from tuning.decide.search.adopt import import_result

pytestmark = pytest.mark.browser
EXAMPLES = REPO / "examples" / "h200"
VIEWPORTS = ((1440, 900), (1024, 768))
QUERY = {"Live": "?experiment=1", "Searches": "?search=1"}
BOXED = (
    "[data-testid='stDataFrame'], [data-testid='stVegaLiteChart'], [data-testid='stTable'], "
    "[data-testid='stMetric'], [data-testid='stCode'], h1, h2, h3, h4, button"
)
TEXTS = (
    "button p, h1, h2, h3, h4, [data-testid='stExpander'] summary p, [data-testid='stTab'] p, "
    "[data-testid='stMetricLabel'] p, [data-testid='stWidgetLabel'] p"
)
# What lies outside the viewport, and what text is cut short, in the main area.
OUT_OF_BOUNDS = """([boxed, texts, width]) => {
    const main = document.querySelector("[data-testid='stMain']");
    const name = (e) => (e.getAttribute("data-testid") || e.tagName) + ": "
        + (e.innerText || "").slice(0, 50);
    const outside = [...main.querySelectorAll(boxed)].filter((e) => {
        // a multiselect's chips scroll inside its box: their remove buttons may lie past it
        if (e.closest("[data-testid='stMultiSelect']")) return false;
        const r = e.getBoundingClientRect();
        return r.width > 0 && (r.left < -1 || r.right > width + 1);
    }).map((e) => [name(e), Math.round(e.getBoundingClientRect().right)]);
    const cut = [...main.querySelectorAll(texts)].filter((e) => {
        const r = e.getBoundingClientRect();
        return r.width > 0 && e.scrollWidth > e.clientWidth + 1
            && getComputedStyle(e).textOverflow === "ellipsis";
    }).map(name);
    return {outside, cut};
}"""
# The columns Glide draws of the `index`-th dataframe (its accessible table lists only those).
DRAWN_COLUMNS = """(index) => {
    const grid = document.querySelectorAll("[data-testid='stDataFrame']")[index];
    return [...grid.querySelectorAll("[role='columnheader']")].map((c) => c.innerText);
}"""


def drawn_columns(page: Any, index: int = 0) -> list[str]:
    assert index >= 0, "no such table on the page"
    grid = page.locator("[data-testid='stDataFrame']").nth(index)
    grid.scroll_into_view_if_needed()
    for _ in range(40):  # the grid draws once it is in view
        shown = page.evaluate(DRAWN_COLUMNS, index)
        if shown:
            return list(shown)
        page.wait_for_timeout(250)
    return []


def table_index(page: Any, key: str) -> int:
    """The position among the page's dataframes of the one inside the keyed block `key`."""
    return int(
        page.evaluate(
            """(key) => [...document.querySelectorAll("[data-testid='stDataFrame']")]
                .findIndex((d) => d.closest(".st-key-" + key))""",
            key,
        )
    )


# The main area's text without its code blocks.
PROSE = """() => {
    const main = document.querySelector("[data-testid='stMain']").cloneNode(true);
    main.querySelectorAll("[data-testid='stCode'], pre, code").forEach((e) => e.remove());
    return main.innerText;
}"""


def raw_bytes(db_path: Path) -> re.Pattern[str]:
    """The lab's bytes-typed values (kv-cache-memory-bytes 1G, 16G) as raw counts, plain or with
    separators: none may be shown (a value over 9,999 bytes reads in KiB/MiB/GiB)."""
    from store import connect
    from tuning.engine.params import get_param

    with connect(db_path, readonly=True) as db:
        rows = db.conn.execute("select distinct param, value from runs").fetchall()
    counts = {int(v) for p, v in rows if get_param(p).type == "bytes" and int(v) > 9999}
    assert counts, "the lab has no bytes-typed values to look for"
    forms = {f for n in counts for f in (str(n), f"{n:,}")}
    return re.compile(r"(?<![\d,])(" + "|".join(map(re.escape, sorted(forms))) + r")(?![\d,])")


def check_page(page: Any, path: str, width: int, raw: re.Pattern[str]) -> None:
    no_exception(page)
    shown = page.locator("[data-testid='stMain']").inner_text()
    assert not EMOJI.search(shown), (path, EMOJI.findall(shown)[:5])
    # a command to copy (a `vllm serve` line) keeps vLLM's own exact value: read outside code
    prose = page.evaluate(PROSE)
    assert not raw.search(prose), (path, raw.findall(prose)[:3])
    assert below_minus_100(shown) == [], (path, below_minus_100(shown)[:3])
    found = page.evaluate(OUT_OF_BOUNDS, [BOXED, TEXTS, width])
    assert found["outside"] == [], (path, width, found["outside"][:5])
    assert found["cut"] == [], (path, width, found["cut"][:5])


def test_every_page_holds_at_1440_and_1024(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "lab"
    copy_db(EXAMPLES / "lab-h200-decisions.db.xz", home / "lab.db")
    search = json.loads((EXAMPLES / "decisions-search.json").read_text())
    assert import_result(home / "lab.db", search) == 1
    raw = raw_bytes(home / "lab.db")
    errors: list[str] = []
    verdicts = 0
    with serve_app(home, tmp_path / "streamlit.log") as url:
        for width, height in VIEWPORTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            for path in PAGES:
                page.goto(f"{url}/{path}{QUERY.get(path, '')}")
                wait_idle(page)
                page.wait_for_timeout(1000)  # a fragment's first draw, Vega's first layout
                check_page(page, path or "Home", width, raw)
                if path == "":  # the sidebar's first entry names the page, not the file ("app")
                    first = page.locator("[data-testid='stSidebarNav'] a").first
                    assert first.inner_text().strip() == "Home"
                elif path == "Runs":
                    columns = drawn_columns(page)
                    assert columns[0] == "run" and "output" in columns, (width, columns)
                    assert "mean TTFT" in columns, (width, columns)
                elif path == "History":
                    columns = drawn_columns(page)  # the Runs tab comes first
                    assert {"run", "tags", "notes"} <= set(columns), (width, columns)
                elif path == "Compare":
                    index = table_index(page, "cmp_table")
                    columns = drawn_columns(page, index)
                    verdict = next(c for c in columns if c.startswith("verdict "))
                    after = columns.index(verdict) + 1
                    assert columns[:2] == ["metric", "Δ 16 GiB"], (width, columns)
                    assert after < len(columns), (width, columns)  # the verdict wholly drawn
                    verdicts += assert_verdicts_fit(page, home / "lab.db", 1)
            page.close()
    assert verdicts >= 20
    assert errors == [], errors[:3]
