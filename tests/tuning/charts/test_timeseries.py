"""Time series: counter rates, downsampling that keeps the peak, and the live chart of one run."""

from __future__ import annotations

from typing import Any

import pytest

from store import timeseries
from tests.checks import png_size
from tuning.compare.comparison import request_columns
from tuning.present import export
from tuning.present.charts import common
from tuning.present.charts import timeseries as ts


def test_live_chart_and_rates(charts_lab: dict[str, Any]) -> None:
    assert ts.counter_rate([(0, 0), (1, 10), (2, 30), (3, 5)]) == [(1, 10.0), (2, 20.0), (3, 0.0)]
    assert len(common.downsample([(float(i), float(i % 7)) for i in range(10_000)], 500)) <= 500
    assert (
        max(
            v
            for _, v in common.downsample(
                [(float(i), 0.0 if i != 4321 else 9.0) for i in range(10_000)], 100
            )
        )
        == 9.0
    )
    rid = charts_lab["runs"][0]["id"]
    series = {
        name: timeseries.load_series(charts_lab["db"], rid, name, 300)
        for name in (
            "tree_rss_bytes",
            "kv_cache_usage_perc",
            "generation_tokens_total",
            "num_requests_running",
        )
    }
    assert len(series["tree_rss_bytes"]) <= 301
    chart = ts.live_chart(series, "tree_rss_bytes")
    spec = chart.to_dict()
    assert len(spec["vconcat"]) == 3  # no running/waiting samples: that panel is left out
    png = export.chart_png(chart)
    png_size(png)
    rates = ts.tokens_rate_from_requests(
        request_columns(charts_lab["db"], rid, with_itl=True), 10.0
    )
    assert rates and sum(v for _, v in rates) == pytest.approx(30 * 8, rel=1e-6)
