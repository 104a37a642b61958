"""The metric catalogue: which direction is better for each metric."""

from __future__ import annotations

from tuning.compare.catalog import METRIC_BY_KEY


def test_metric_directions() -> None:
    lower = {
        "mean_ttft_ms",
        "p99_e2el_ms",
        "peak_tree_rss_bytes",
        "failed",
        "preemptions",
        "time_to_healthy_s",
    }
    higher = {"output_throughput", "request_goodput", "kv_cache_tokens"}
    assert all(METRIC_BY_KEY[k].better == "lower" for k in lower)
    assert all(METRIC_BY_KEY[k].better == "higher" for k in higher)
