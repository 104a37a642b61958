"""Peaks from samples: in any order, summed over devices at one instant, counters as deltas, load
keys inside the load window and memory over the whole run."""

from __future__ import annotations

from core.records import SampleRow
from tuning.telemetry.peaks import PEAK_KEYS, peaks


def test_peaks_from_rows_in_any_order() -> None:
    rows = [
        SampleRow(0.0, "num_preemptions_total", 5.0),
        SampleRow(3.0, "num_preemptions_total", 9.0),
        SampleRow(0.0, "prefix_cache_queries_total", 100.0),
        SampleRow(3.0, "prefix_cache_queries_total", 500.0),
        SampleRow(0.0, "prefix_cache_hits_total", 10.0),
        SampleRow(3.0, "prefix_cache_hits_total", 110.0),
        SampleRow(1.0, "gpu_used_bytes", 4.0, "gpu0"),
        SampleRow(1.0, "gpu_used_bytes", 5.0, "gpu1"),
        SampleRow(2.0, "gpu_used_bytes", 8.0, "gpu0"),
        SampleRow(2.0, "gpu_used_bytes", 0.0, "gpu1"),
        SampleRow(1.0, "gpu_tree_bytes", 3.0, "gpu0"),
        SampleRow(1.0, "tree_rss_bytes", 7.0),
        SampleRow(2.0, "tree_rss_bytes", 6.0),
        SampleRow(1.0, "kv_cache_usage_perc", 0.9),
        SampleRow(2.0, "num_requests_waiting", 3.0),
        SampleRow(1.0, "generation_tokens_total", 10.0),
    ]
    result = peaks(list(reversed(rows)), gpu_baseline={"gpu0": 1, "gpu1": 1})
    assert set(result) == set(PEAK_KEYS)
    assert result["peak_gpu_used_bytes"] == 9.0
    assert result["peak_gpu_used_over_baseline_bytes"] == 7.0
    assert result["peak_gpu_tree_bytes"] == 3.0
    assert result["peak_tree_rss_bytes"] == 7.0
    assert result["preemptions"] == 4.0
    assert result["prefix_cache_hit_rate"] == 0.25
    assert result["generation_tokens_delta"] == 0.0
    assert result["max_num_requests_waiting"] == 3.0
    assert result["peak_kv_cache_usage_perc"] == 0.9
    assert result["max_num_requests_running"] is None
    assert peaks([])["prefix_cache_hit_rate"] is None


def test_peaks_window_takes_load_keys_inside_and_memory_over_all() -> None:
    rows = [
        SampleRow(0.5, "gpu_used_bytes", 9.0, "gpu0"),  # startup peak, before the load
        SampleRow(1.0, "tree_rss_bytes", 5.0),
        SampleRow(2.5, "gpu_used_bytes", 7.0, "gpu0"),
        SampleRow(3.0, "tree_rss_bytes", 4.0),
        SampleRow(1.0, "kv_cache_usage_perc", 0.9),  # warm-up, outside
        SampleRow(3.0, "kv_cache_usage_perc", 0.4),
    ]
    rows += [
        SampleRow(t, "num_preemptions_total", v)
        for t, v in ((0.0, 0.0), (1.5, 1.0), (2.5, 3.0), (4.5, 7.0), (6.0, 9.0))
    ]
    rows += [SampleRow(t, "prefix_cache_queries_total", 100.0 * t) for t in (1.5, 2.5, 4.5)]
    rows += [SampleRow(t, "prefix_cache_hits_total", 50.0 * t) for t in (1.5, 2.5, 4.5)]
    result = peaks(rows, window=(2.0, 4.0))
    assert result["peak_gpu_used_bytes"] == 9.0 and result["load_peak_gpu_used_bytes"] == 7.0
    assert result["peak_tree_rss_bytes"] == 5.0 and result["load_peak_tree_rss_bytes"] == 4.0
    assert result["load_peak_gpu_tree_bytes"] is None
    assert result["peak_kv_cache_usage_perc"] == 0.4
    assert result["preemptions"] == 6.0  # 7 (first at/after 4.0) - 1 (last at/before 2.0)
    assert result["prefix_cache_hit_rate"] == 0.5
    assert peaks(rows)["preemptions"] == 9.0 and peaks(rows)["load_peak_gpu_used_bytes"] is None
