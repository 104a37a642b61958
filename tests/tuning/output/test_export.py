"""Exports: PNG/SVG/HTML render offline, HTML references nothing on the network, CSV cells cannot
become formulas, file names never come from user text."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from typing import Any

from tests.checks import png_size
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.present import export
from tuning.present.charts import compare as charts_compare


def test_png_svg_html_exports(charts_lab: dict[str, Any]) -> None:
    chart = charts_compare.throughput_chart(charts_lab["cmp"])
    png = export.chart_png(chart)
    width, height = png_size(png)
    assert width > 100 and height > 100
    try:
        from PIL import Image
    except ImportError:
        pass
    else:
        img = Image.open(io.BytesIO(png))
        img.load()
        assert img.size == (width, height)
    svg = export.chart_svg(chart)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    html = export.chart_html(chart).decode("utf-8")
    assert export.network_references(html) == []
    lowered = html.lower()
    assert "<script src" not in lowered and '<script type="text/javascript" src' not in lowered
    assert "<link" not in lowered and "@import" not in lowered
    assert "vegaEmbed(" in html and "output_throughput" not in html.split("vegaEmbed(")[0][:200]


def test_network_reference_detector() -> None:
    assert export.network_references('<script src="https://cdn.jsdelivr.net/npm/vega">')
    assert export.network_references("<link rel=stylesheet href='//fonts.example/x.css'>")
    assert export.network_references("<style>@import url(https://x/y.css)</style>")
    assert not export.network_references(
        '<script type="text/javascript">var a = "http://x";</script>'
    )


def test_csv_cells_are_defused() -> None:
    rows = [
        {
            "side": '=HYPERLINK("http://x")',
            "a": "+1",
            "b": "-2",
            "c": "@SUM(A1)",
            "d": "\tx",
            "e": "\rx",
            "f": -3.5,
            "g": "plain",
            "h": None,
        }
    ]
    text = export.rows_csv(rows).decode("utf-8")
    lines = text.splitlines()
    assert lines[0] == "side,a,b,c,d,e,f,g,h"
    body = text.split("\n", 1)[1]
    for cell in ("'=HYPERLINK", "'+1", "'-2", "'@SUM(A1)", "'\tx", "-3.5", "plain"):
        assert cell in body, cell
    assert "'\rx" in body
    assert export.escape_cell(-2) == -2 and export.escape_cell("-2") == "'-2"
    header = export.rows_csv([{"=evil": 1}]).decode().splitlines()[0]
    assert header == "'=evil"


def test_comparison_csv_and_json(charts_lab: dict[str, Any]) -> None:
    cmp = build_comparison(charts_lab["runs"], default_baseline(charts_lab["runs"]))
    cmp.baseline.label = "=danger"  # a label that came from user text
    text = export.comparison_csv(cmp).decode()
    assert "'=danger" in text and "\n=danger" not in text
    data = json.loads(export.comparison_json(cmp))
    assert data["verdict_rule"]["unit"] == "run"
    verdicts = {(r["side"], r["metric"]): r["verdict"] for r in data["rows"]}
    assert verdicts[("block-size = 8", "mean_ttft_ms")] == "worse"


def test_file_names_are_generated() -> None:
    assert export.export_name(12, "throughput", "png") == "compare-exp12-throughput.png"
    assert export.export_name(None, "table", "csv") == "compare-runs-table.csv"
    evil = export.export_name("../../etc/passwd", "../x y;rm -rf", ".p/n\\g")
    assert "/" not in evil and "\\" not in evil and ".." not in evil and " " not in evil
    assert evil.startswith("compare-runs-")
    assert export.export_name(True, "", "") == "compare-runs-chart.bin"
