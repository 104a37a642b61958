"""vLLM's /metrics: parsed (engines and reasons summed, old names understood, garbage ignored) and
scraped by the sampler, which counts failures and never waits past its timeout."""

from __future__ import annotations

from pathlib import Path

from tests.checks import by_series
from tests.fakes.fake_metrics import MetricsServer
from tuning.measure.telemetry.prom import MetricsSampler, parse_vllm_metrics

DATA = Path(__file__).resolve().parents[2] / "data"


SNIPPET = """\
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 3.0
vllm:num_preemptions_created{engine="0",model_name="tiny"} 1.7962334282248952e+09
vllm:num_preemptions_total{engine="1",model_name="tiny"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.75
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 10.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 2.0
vllm:request_success_created{engine="0",finished_reason="length",model_name="tiny"} 1.79e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 4.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 9.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="tiny"} 7.0
vllm:iteration_tokens_total_count{engine="0",model_name="tiny"} 7.0
vllm:prompt_tokens_cached_total{engine="0",model_name="tiny"} 99.0
"""


def test_parse_snippet_sums_engines_and_reasons() -> None:
    values = parse_vllm_metrics(SNIPPET)
    assert values == {
        "num_preemptions_total": 5.0,
        "kv_cache_usage_perc": 0.5,  # averaged over engines, kept 0..1
        "request_success_total": 12.0,
        "num_requests_running": 4.0,
    }


def test_parse_real_embedded_engine_dump() -> None:
    values = parse_vllm_metrics((DATA / "real_metrics.txt").read_text())
    assert values == {
        "num_requests_running": 0.0,
        "num_requests_waiting": 0.0,
        "kv_cache_usage_perc": 0.0,
        "prefix_cache_queries_total": 5.0,
        "prefix_cache_hits_total": 0.0,
        "num_preemptions_total": 0.0,
        "prompt_tokens_total": 5.0,
        "generation_tokens_total": 16.0,
        "request_success_total": 1.0,
    }


def test_parse_old_gpu_cache_name_and_garbage() -> None:
    assert parse_vllm_metrics('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n') == {
        "kv_cache_usage_perc": 0.5
    }
    assert parse_vllm_metrics("<html>not metrics</html>") == {}


def test_metrics_sampler_reads_and_counts_failures(metrics_server: MetricsServer) -> None:
    sampler = MetricsSampler(metrics_server.url + "/", period=0.5, timeout=0.3)
    rows = sampler.sample(1.5)
    assert by_series(rows, "num_preemptions_total") == {"": 2.0}
    assert by_series(rows, "kv_cache_usage_perc") == {"": 0.1}
    assert all(r.t == 1.5 for r in rows)
    metrics_server.mode = "error"
    assert sampler.sample(2.0) == []
    metrics_server.mode = "slow"  # answers after 1 s: the sampler's 0.3 s timeout ends it first
    assert sampler.sample(2.5) == []
    assert sampler.failures == 2 and "timed out" in (sampler.last_error or "")
    metrics_server.mode = "ok"
    dead = MetricsSampler("http://127.0.0.1:9", timeout=0.3)  # nothing listens there
    assert dead.sample(0.0) == [] and dead.failures == 1
