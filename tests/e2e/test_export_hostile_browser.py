"""Hostile exports in the real browser (Debian's chromium through Playwright, network cut): a run
value that closes the inline <script> of a chart's HTML export, or carries an onerror image, runs
nothing, and the chart still draws. A page built the way the lab used to build it (Altair's own
save) runs the same payload, which proves the hook below sees script execution."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.hostile import chart_html_cli
from tuning.present import export
from tuning.present.charts import compare as charts_compare
from tuning.present.report import write_report

pytestmark = pytest.mark.browser
# Before any of the page's own script: what the payload sets, and a record of alert() calls.
HOOK = "window.__pwned = undefined; window.__alerts = [];"


def _open(browser: Any, file: Path) -> tuple[Any, dict[str, Any]]:
    """The file in an offline page; returns the page and what it did: dialogs opened, requests
    made to anything but the file, errors thrown."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_offline(True)
    seen: dict[str, Any] = {"dialogs": [], "requests": [], "errors": []}

    def gate(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            seen["requests"].append(route.request.url)
            route.abort()

    context.route("**/*", gate)
    context.add_init_script(HOOK)
    page = context.new_page()

    def dialog(d: Any) -> None:
        seen["dialogs"].append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.goto(file.as_uri())
    page.wait_for_load_state("load")
    return page, seen


def _executed(page: Any, seen: dict[str, Any]) -> list[str]:
    """Every sign that script from the data ran."""
    signs = [f"dialog: {m}" for m in seen["dialogs"]]
    pwned = page.evaluate("window.__pwned")
    if pwned is not None:
        signs.append(f"window.__pwned = {pwned!r}")
    return signs


# How much of the chart is drawn: bars and run dots (SVG renderer) or inked pixels (canvas).
DRAWN = """() => {
  const el = document.querySelector('.vega-embed .marks');
  if (!el) return {bars: 0, dots: 0, pixels: 0};
  if (el.tagName.toLowerCase() === 'svg') {
    return {
      bars: el.querySelectorAll('.mark-rect path').length,
      dots: el.querySelectorAll('.mark-symbol path').length,
      pixels: 0,
    };
  }
  if (!el.width || !el.height) return {bars: 0, dots: 0, pixels: 0};
  const data = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
  let inked = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) inked++;
  return {bars: 0, dots: 0, pixels: inked};
}"""


def _chart_drawn(page: Any) -> dict[str, int]:
    """Waits for Vega's asynchronous draw: both sides' bars and the four runs' dots (SVG), or a
    canvas with ink; returns what it counted."""
    page.wait_for_function(
        f"(d => (d.bars >= 2 && d.dots >= 4) || d.pixels >= 5000)(({DRAWN})())", timeout=30_000
    )
    drawn: dict[str, int] = page.evaluate(DRAWN)
    return drawn


def test_chart_html_exports_run_no_script_from_data(browser: Any, hostile: dict[str, Any]) -> None:
    home: Path = hostile["home"]
    cli_out = home / "chart-cli.html"
    code = chart_html_cli(hostile, cli_out)
    assert code == 0
    chart = charts_compare.throughput_chart(hostile["cmp"])
    page_download = home / "chart-download.html"  # the Compare page's HTML button
    page_download.write_bytes(export.chart_bytes(chart, "html"))
    for file in (cli_out, page_download):
        page, seen = _open(browser, file)
        assert _chart_drawn(page), file.name
        page.wait_for_timeout(300)  # let any late handler (onerror) fire
        assert _executed(page, seen) == [], file.name
        assert seen["requests"] == [] and seen["errors"] == [], (file.name, seen)
        page.context.close()


def test_the_hook_sees_the_payload_run_in_an_unescaped_page(
    browser: Any, hostile: dict[str, Any]
) -> None:
    """Control: the same chart saved by Altair's own template (how `chart --out x.html` wrote it
    before) runs the payload in chromium, so the test above would have caught it."""
    chart = charts_compare.throughput_chart(hostile["cmp"])
    buf = io.StringIO()
    chart.save(buf, format="html", inline=True, embed_options={"actions": False})
    naive = hostile["home"] / "chart-naive.html"
    naive.write_text(buf.getvalue(), encoding="utf-8")
    page, seen = _open(browser, naive)
    page.wait_for_timeout(500)
    assert _executed(page, seen), "the payload did not run in the unescaped page"
    page.context.close()


def test_report_runs_no_script_from_data(browser: Any, hostile: dict[str, Any]) -> None:
    out = write_report(
        hostile["path"],
        hostile["home"] / "report.html",
        experiment_ids=[hostile["experiment_id"]],
        kinds=("throughput",),
    )
    page, seen = _open(browser, out)
    page.wait_for_timeout(300)
    assert _executed(page, seen) == []
    assert seen["requests"] == []
    marks = page.evaluate(
        "document.querySelectorAll('figure.chart svg path, figure.chart svg rect').length"
    )
    assert marks > 5
    assert "window.__pwned=1" in page.inner_text("body")  # shown, as text
    page.context.close()
