"""Hostile run values in HTML exports: the chart page's inline Vega spec cannot be closed from
data (`chart --out x.html`, the Compare page's HTML download), and the offline report shows the
same text as text. The real-browser proof is tests/e2e/test_export_hostile_browser.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import connect
from tests.checks import start_tags
from tests.fakes.hostile import chart_html_cli
from tuning.present import export
from tuning.present.charts import compare as charts_compare
from tuning.present.charts import kinds
from tuning.present.charts.build import build_chart
from tuning.present.charts.common import short_labels
from tuning.present.report import build_report


def test_script_json_escapes_what_ends_a_script() -> None:
    text = export.script_json({"v": "</script><!--<script>&\u2028\u2029", "n": [1.5, None]})
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert "\\u003c/script\\u003e" in text and "\\u0026" in text
    assert "\\u2028" in text and "\\u2029" in text
    assert json.loads(text) == {"v": "</script><!--<script>&\u2028\u2029", "n": [1.5, None]}


def _script_bodies(page: str) -> list[str]:
    lowered = page.lower()
    bodies, pos = [], 0
    while (start := lowered.find("<script", pos)) >= 0:
        open_end = lowered.index(">", start) + 1
        end = lowered.find("</script", open_end)
        bodies.append(page[open_end:end])
        pos = end + 1
    return bodies


def _assert_inert(page: str) -> None:
    """Exactly the page's own two scripts (the inlined Vega bundle and the embed call); the
    hostile text sits inside the spec as \\u escapes."""
    assert [t for t, _ in start_tags(page) if t in ("script", "img")] == ["script", "script"]
    assert "window.__pwned" in page  # the value is there, as data
    assert "</script><script>window.__pwned" not in page
    assert "<!--<script>" not in page and "\u2028" not in page and "\u2029" not in page
    embed = _script_bodies(page)[-1]
    assert "vegaEmbed(" in embed
    spec_text = embed.split("const spec = ", 1)[1].split(";\n", 1)[0]
    spec = json.dumps(json.loads(spec_text), ensure_ascii=False)
    assert "</script><script>window.__pwned=1;alert(1)</script><!--<script>" in spec


def test_chart_html_keeps_a_hostile_value_inside_the_spec(hostile: dict[str, Any]) -> None:
    chart = charts_compare.throughput_chart(hostile["cmp"])
    page = export.chart_bytes(chart, "html").decode("utf-8")  # what the Compare page downloads
    _assert_inert(page)


def test_chart_cli_html_keeps_a_hostile_value_inside_the_spec(
    hostile: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.html"
    code = chart_html_cli(hostile, out)
    assert code == 0, capsys.readouterr()
    _assert_inert(out.read_text(encoding="utf-8"))


def test_report_shows_a_script_breakout_as_text(hostile: dict[str, Any]) -> None:
    page = build_report(
        hostile["path"], experiment_ids=[hostile["experiment_id"]], kinds=("throughput",)
    )
    names = [t for t, _ in start_tags(page)]
    assert "script" not in names and "img" not in names
    assert "</script><script>" not in page and "<!--<script>" not in page
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1" in page
    assert all(not k.startswith("on") for _, attrs in start_tags(page) for k in attrs)


def test_every_chart_of_a_hostile_comparison_still_draws(hostile: dict[str, Any]) -> None:
    """A U+2028 in a value used to be a syntax error in Vega's sort expression: no chart drew."""
    drawn = []
    with connect(hostile["path"], readonly=True) as db:
        charts = {kind: build_chart(db, hostile["cmp"], kind) for kind in kinds.CHART_KINDS}
    for kind, chart in charts.items():
        if chart is None:
            continue
        svg = export.chart_svg(chart).decode("utf-8")
        assert "<svg" in svg and "window.__pwned" in svg, kind  # the value, drawn as text
        drawn.append(kind)
    assert {"throughput", "latency", "cdf"} <= set(drawn)
    labels = set(short_labels(hostile["cmp"]).values())
    assert all("\u2028" not in x and len(x) <= 80 for x in labels)
    assert len(labels) == len(hostile["cmp"].sides)
