"""Checks of every page in a real browser, shared by the browser tests: no exception, no emoji in
what a page shows, and no verdict cell of the Compare table wider than its column (cut text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.pages.test_icons import EMOJI
from tools.browser import wait_idle

PAGES = ["", "New_experiment", "Runs", "Live", "Compare", "History", "Settings", "Searches"]
# A dataframe cell's text is drawn on a canvas in the theme's font at 14 px.
MEASURE = """(texts) => {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = "14px 'Source Sans', sans-serif";
    return texts.map((t) => ctx.measureText(t).width);
}"""


def no_exception(page: Any) -> None:
    # The app's own exceptions (the server log tail on Live may quote vLLM's).
    assert page.locator("[data-testid='stException']").count() == 0, page.url


def check_every_page(page: Any, url: str, db_path: Path, experiment_id: int) -> int:
    """Open every page (Live and Compare on `experiment_id`); returns the verdict cells measured."""
    measured = 0
    for path in PAGES:
        query = f"?experiment={experiment_id}" if path in ("Live", "Compare") else ""
        page.goto(f"{url}/{path}{query}")
        wait_idle(page)
        page.wait_for_timeout(500)  # a fragment's first draw
        no_exception(page)
        shown = page.locator("[data-testid='stMain']").inner_text()
        assert not EMOJI.search(shown), (path, EMOJI.findall(shown)[:5])
        if path == "Compare":
            measured += assert_verdicts_fit(page, db_path, experiment_id)
    return measured


def assert_verdicts_fit(page: Any, db_path: Path, experiment_id: int) -> int:
    """Every verdict cell of the side-by-side table, drawn in the page's font, fits the width the
    page gave its column (Streamlit cuts what does not); returns the cells measured."""
    from store import connect
    from tuning.compare.comparison import default_baseline
    from tuning.compare.selection import gather_runs
    from tuning.present.model import build_model
    from ui.compare import CELL_PADDING_PX, table_frames, table_widths

    with connect(db_path, readonly=True) as db:  # as the page builds it: one report model
        runs, named = gather_runs(db, experiment_ids=[experiment_id])
        comparison = build_model(
            db,
            experiment_ids=[experiment_id],
            runs=runs,
            experiments=named,
            baseline_ids=default_baseline(runs),
        ).comparison
    text, _ = table_frames(comparison)
    widths = table_widths(text)
    checked = 0
    for column in text.columns:
        if not column.startswith("verdict "):
            continue
        room = widths[column]["width"] - 2 * CELL_PADDING_PX
        cells = [str(t) for t in text[column] if t]
        drawn = page.evaluate(MEASURE, cells)
        too_wide = [(t, w) for t, w in zip(cells, drawn, strict=True) if w > room]
        assert too_wide == [], (room, too_wide)
        checked += len(cells)
    return checked


def fixed_runs(page: Any, runs: int) -> None:
    """On New experiment: a fixed number of runs a value instead of the default until decided (a
    test about the page and the runner, not about deciding, keeps its engine starts few)."""
    page.locator(".st-key-new_repeat_mode").get_by_text("a fixed number").click()
    wait_idle(page)
    box = page.locator(".st-key-new_repeats input")
    box.fill(str(runs))
    box.press("Enter")
    wait_idle(page)
