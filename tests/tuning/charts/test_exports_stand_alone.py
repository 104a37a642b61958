"""Issue 23, item 8: an exported chart stands alone. It says which model, hardware, vLLM and
workload it is of (spec, SVG, HTML; the page's buttons and `chart` alike), draws in the app's
colours with one colour per side on every chart, and keeps its labels and whisker caps apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.factories import run_row
from tuning.cli.main import main as cli_main
from tuning.compare.comparison import build_comparison
from tuning.compare.context import comparison_context
from tuning.present.charts.build import build_chart
from tuning.present.charts.common import CAP_PX, PALETTE, band_axis, short_labels, with_context
from tuning.present.charts.compare import bar_chart
from tuning.present.export import chart_html
from ui.compare import render_export

WORDS = (
    "model tiny",
    "cpu-test",
    "vLLM 0.32.0",
    "input 16 / output 8 tokens, concurrency 4, 30 requests",
)


@pytest.fixture(scope="module")
def context(charts_lab: dict[str, Any]) -> list[str]:
    return comparison_context(charts_lab["runs"], charts_lab["cmp"]).lines()


def _colour_scales(spec: Any) -> list[dict[str, Any]]:
    """Every colour scale by side in a spec, wherever layers or facets put it."""
    out = []
    if isinstance(spec, dict):
        color = (spec.get("encoding") or {}).get("color")
        if isinstance(color, dict) and color.get("field") == "side":
            out.append(color["scale"])
        for value in spec.values():
            out += _colour_scales(value)
    elif isinstance(spec, list):
        for value in spec:
            out += _colour_scales(value)
    return out


@pytest.mark.parametrize("kind", ["throughput", "latency", "knee", "cdf", "memory", "kv"])
def test_every_chart_kind_carries_its_context_at_the_top(
    charts_lab: dict[str, Any], context: list[str], kind: str
) -> None:
    chart = build_chart(charts_lab["db"], charts_lab["cmp"], kind, context=context)
    assert chart is not None
    subtitle = chart.to_dict()["title"]["subtitle"]
    assert subtitle[-2:] == context, subtitle
    assert all(any(w in line for line in subtitle) for w in WORDS), subtitle


def test_the_pages_svg_and_html_files_say_what_they_are_of(
    charts_lab: dict[str, Any], context: list[str]
) -> None:
    chart = build_chart(charts_lab["db"], charts_lab["cmp"], "latency")  # as the page draws it
    assert chart is not None and "model tiny" not in str(chart.to_dict()["title"])
    svg = render_export(chart, "svg", context).decode("utf-8")
    html = render_export(chart, "html", context).decode("utf-8")
    for word in WORDS:
        assert word in svg, word
        assert word in html, word
    assert "model tiny" not in chart_html(chart).decode("utf-8")  # the page's chart is unchanged


def test_cli_chart_file_says_what_it_is_of(charts_lab: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "bars.svg"
    args = ["chart", "--db", str(charts_lab["path"]), "--experiment", str(charts_lab["exp"])]
    assert cli_main([*args, "--kind", "throughput", "--out", str(out)]) == 0
    svg = out.read_text()
    for word in WORDS:
        assert word in svg, word


def test_a_side_keeps_its_colour_on_every_chart(charts_lab: dict[str, Any]) -> None:
    cmp = charts_lab["cmp"]
    order = list(short_labels(cmp).values())
    assert order == ["16 (baseline)", "8"]
    scales = []
    for kind in ("throughput", "latency", "cdf", "memory"):
        chart = build_chart(charts_lab["db"], cmp, kind)
        assert chart is not None
        found = _colour_scales(chart.to_dict())
        assert found, kind
        scales += found
    for scale in scales:
        assert dict(zip(scale["domain"], scale["range"], strict=True)) == {
            "16 (baseline)": "#0068c9",
            "8": "#83c9ff",
        }
    assert tuple(scales[0]["range"]) == PALETTE[:2]  # Streamlit's first categorical colours
    svg = render_export(build_chart(charts_lab["db"], cmp, "throughput"), "svg").decode()
    assert 'fill="#0068c9"' in svg and 'fill="#83c9ff"' in svg  # what vl-convert draws too


def test_long_side_labels_turn_and_whisker_caps_are_small() -> None:
    big = 17179869184
    runs = [run_row(i, v, param="kv-cache-memory-bytes") for i, v in ((1, 2**30), (2, big))]
    spec = bar_chart(build_comparison(runs, [1]), "output_throughput").to_dict()
    x_axis = spec["layer"][0]["encoding"]["x"]["axis"]
    assert x_axis["labelAngle"] == -35 and x_axis["labelLimit"] == 160
    caps = spec["layer"][1]["mark"]["ticks"]
    assert caps["size"] == CAP_PX
    assert band_axis(["2", "16"], 70).to_dict()["labelAngle"] == 0


def test_with_context_leaves_the_chart_given_alone(charts_lab: dict[str, Any]) -> None:
    chart = bar_chart(charts_lab["cmp"], "output_throughput")
    before = chart.to_dict()
    carried = with_context(chart, ["model x", "workload: y"])
    assert chart.to_dict() == before
    assert carried.to_dict()["title"]["subtitle"][-2:] == ["model x", "workload: y"]
    assert carried.to_dict()["title"]["text"] == before["title"]["text"]
    plain = with_context(chart.properties(title="T"), ["a"])
    assert plain.to_dict()["title"] == {"text": "T", "subtitle": ["a"]}


@pytest.mark.parametrize("kind", ["pareto", "search"])
def test_cli_trade_off_files_say_what_they_are_of(
    charts_lab: dict[str, Any], tmp_path: Path, kind: str
) -> None:
    """The trade-off kinds too: before, `chart --kind pareto|search` wrote a bare title."""
    out = tmp_path / f"{kind}.html"
    args = ["chart", "--db", str(charts_lab["path"]), "--experiment", str(charts_lab["exp"])]
    assert cli_main([*args, "--kind", kind, "--out", str(out)]) == 0
    spec = out.read_text()
    for word in WORDS:
        assert word in spec, (kind, word)
