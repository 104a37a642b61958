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


def test_peak_kv_usage_has_no_better_direction() -> None:
    """Issue 37 item 6: a lower peak KV usage was counted "better"; it is a state (more headroom,
    or fewer requests held), so it has no better direction and is never coloured."""
    kv = METRIC_BY_KEY["peak_kv_cache_usage_perc"]
    assert kv.better == "neither"
    assert "no better direction" in kv.definition


def test_every_metric_states_its_direction_and_scale() -> None:
    from tuning.compare.catalog import METRICS

    for metric in METRICS:
        assert metric.better in ("higher", "lower", "neither"), metric.key
        assert metric.scale in ("ratio", "difference"), metric.key
        assert metric.direction_text in metric.definition
    # counts and fractions that are often 0 compare as a difference
    difference = {m.key for m in METRICS if m.scale == "difference"}
    assert {"preemptions", "failed", "peak_kv_cache_usage_perc"} <= difference
    assert "output_throughput" not in difference
