"""Issue 41, item 3 for a server's /metrics: a value no series can hold (NaN, inf, a negative count,
a KV usage over 100 %) is dropped, never stored as a sample or a settled read; the cache config's
labels give no count from inf or -5 (inf used to raise OverflowError at the start)."""

from __future__ import annotations

from tuning.engine.server import StartupFacts, apply_cache_config
from tuning.measure.telemetry.prom import parse_vllm_metrics
from tuning.measure.telemetry.server_stats import parse_server_stats

HOSTILE = "\n".join(
    [
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0"} -3',
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{engine="0"} +Inf',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0"} 7.5',
        "# TYPE vllm:generation_tokens counter",
        'vllm:generation_tokens_total{engine="0"} 120',
        "# TYPE vllm:num_preemptions counter",
        'vllm:num_preemptions_total{engine="0"} NaN',
        "# TYPE vllm:time_to_first_token_seconds histogram",
        'vllm:time_to_first_token_seconds_count{engine="0"} -4',
        'vllm:time_to_first_token_seconds_sum{engine="0"} 0.5',
    ]
)


def test_values_no_series_can_hold_are_dropped() -> None:
    assert parse_vllm_metrics(HOSTILE) == {"generation_tokens_total": 120.0}
    stats = parse_server_stats(HOSTILE)
    assert "time_to_first_token_seconds_count" not in stats
    assert stats["time_to_first_token_seconds_sum"] == 0.5


def test_cache_config_labels_give_no_impossible_count() -> None:
    facts = StartupFacts()
    labels = {"block_size": "inf", "num_gpu_blocks": "-5", "kv_cache_memory_bytes": "1.5"}
    apply_cache_config(facts, {**labels, "kv_cache_size_tokens": "4096"})  # raised on 9aeadaf
    assert (facts.block_size, facts.num_blocks, facts.kv_cache_memory_bytes) == (None, None, None)
    assert facts.kv_cache_tokens == 4096
