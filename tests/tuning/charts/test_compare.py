"""Issue 23, item 2: charts of a comparison's sides never draw a non-negative metric below 0: the
whiskers are the log-scale interval of each side's mean, and the y axes start at 0."""

from __future__ import annotations

from typing import Any

from tests.factories import run_row
from tuning.compare.comparison import build_comparison
from tuning.present.charts.common import side_frame
from tuning.present.charts.compare import bar_chart, knee_chart, latency_chart


def _y_scales(spec: Any) -> list[dict[str, Any]]:
    """Every y encoding's scale in a chart spec, wherever the layers or facets put it."""
    out = []
    if isinstance(spec, dict):
        y = (spec.get("encoding") or {}).get("y")
        if isinstance(y, dict):
            out.append(y.get("scale") or {})
        for value in spec.values():
            out += _y_scales(value)
    elif isinstance(spec, list):
        for value in spec:
            out += _y_scales(value)
    return out


def test_whiskers_and_axes_of_a_large_ttft_drop_stay_at_or_above_zero() -> None:
    # the H200 TTFT runs (512 vs 4096): two noisy runs a side once gave whiskers far
    # below 0 and latency axes down to -5,000 ms
    runs = [
        run_row(1, 512, ttft=2743.0, tput=900.0),
        run_row(2, 512, ttft=2344.0, tput=1500.0),
        run_row(3, 4096, ttft=236.0, tput=1000.0),
        run_row(4, 4096, ttft=20.0, tput=1900.0),
    ]
    cmp = build_comparison(runs, [1, 2])
    keys = ["mean_ttft_ms", "output_throughput", "p99_ttft_ms"]
    frame = side_frame(cmp, keys)
    assert (frame["low"] >= 0).all() and (frame["low"] <= frame["mean"]).all()
    for chart in (
        bar_chart(cmp, "mean_ttft_ms"),
        latency_chart(cmp),
        knee_chart(cmp, ("output_throughput", "p99_ttft_ms")),
    ):
        scales = _y_scales(chart.to_dict())
        assert scales and all(s.get("domainMin") == 0 for s in scales if "domainMin" in s)
        assert any(s.get("domainMin") == 0 for s in scales)
