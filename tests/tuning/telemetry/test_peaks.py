"""Peaks from samples: in any order, summed over devices at one instant, counters as deltas, load
keys inside the load window and memory over the whole run."""

from __future__ import annotations

from core.records import SampleRow
from tuning.measure.telemetry.peaks import PEAK_KEYS, peaks


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


def test_gauges_that_never_saw_a_running_request_while_tokens_flowed_are_unknown() -> None:
    """Seen in `make test` on a busy machine: every scrape in the load window said 0 running, 0 %
    KV used, while the counter grew by 4,096 tokens; the run stored a 0 % peak KV usage."""
    rows = [
        SampleRow(19.2, "kv_cache_usage_perc", 0.0005),
        SampleRow(19.2, "num_requests_running", 2),
    ]
    for t, gen in ((20.4, 781.0), (22.3, 2112.0), (24.2, 3072.0), (27.8, 5120.0)):
        rows += [
            SampleRow(t, "generation_tokens_total", gen),
            SampleRow(t, "kv_cache_usage_perc", 0.0),
            SampleRow(t, "num_requests_running", 0.0),
            SampleRow(t, "num_requests_waiting", 0.0),
        ]
    result = peaks(rows, window=(21.1, 27.7))
    assert result["generation_tokens_delta"] == 5120.0 - 781.0
    assert result["peak_kv_cache_usage_perc"] is None
    assert result["max_num_requests_running"] is None and result["max_num_requests_waiting"] is None
    # one scrape that caught the engine at work: the gauges are read as they are
    rows.append(SampleRow(23.0, "num_requests_running", 1.0))
    assert peaks(rows, window=(21.1, 27.7))["peak_kv_cache_usage_perc"] == 0.0
    # an idle window (no token generated): 0 is the truth
    idle = [
        SampleRow(t, s, 0.0)
        for t in (1.0, 2.0)
        for s in ("kv_cache_usage_perc", "num_requests_running", "generation_tokens_total")
    ]
    assert peaks(idle, window=(0.5, 2.5))["peak_kv_cache_usage_perc"] == 0.0


def test_settled_reads_give_the_window_counter_deltas_the_samples_missed() -> None:
    """CI, issue 22's flake: a 3-second multi-turn load with prefix caching on stored 0 hits: its
    window's samples straddled no change. The settled reads around the load are exact; a counter
    only the samples carry still comes from them."""
    rows = [SampleRow(t, "prefix_cache_hits_total", 40.0) for t in (1.0, 5.0)]
    rows += [SampleRow(t, "prefix_cache_queries_total", 100.0) for t in (1.0, 5.0)]
    rows += [
        SampleRow(1.0, "num_preemptions_total", 0.0),
        SampleRow(5.0, "num_preemptions_total", 2.0),
    ]
    before = {"prefix_cache_hits_total": 0.0, "prefix_cache_queries_total": 20.0}
    after = {"prefix_cache_hits_total": 40.0, "prefix_cache_queries_total": 100.0}
    sampled = peaks(rows, window=(2.0, 4.0))
    assert sampled["prefix_cache_hits_delta"] == 0.0 and sampled["prefix_cache_hit_rate"] is None
    result = peaks(rows, window=(2.0, 4.0), settled=(before, after))
    assert (
        result["prefix_cache_hits_delta"] == 40.0 and result["prefix_cache_queries_delta"] == 80.0
    )
    assert result["prefix_cache_hit_rate"] == 0.5
    assert result["preemptions"] == 2.0  # not in the settled reads: the samples'
    assert peaks(rows, window=(2.0, 4.0), settled=(None, after)) == sampled
