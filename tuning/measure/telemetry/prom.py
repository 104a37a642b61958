"""vLLM's own view of a run, scraped from its Prometheus /metrics: KV cache usage, queue,
preemptions, prefix cache and token counters, parsed with prometheus_client; a value no such
series can hold (NaN, inf, negative, a usage fraction over 1) is dropped.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from core.plausible import in_range
from core.records import SampleRow
from tuning.measure.telemetry.recorder import Sampler

# Exposed name without "vllm:" and without "_total" -> series. Counters keep "_total" in the series
# name because that is the name people grep for in /metrics.
METRIC_SERIES: dict[str, str] = {
    "kv_cache_usage_perc": "kv_cache_usage_perc",
    "num_requests_running": "num_requests_running",
    "num_requests_waiting": "num_requests_waiting",
    "num_preemptions": "num_preemptions_total",
    "prefix_cache_queries": "prefix_cache_queries_total",
    "prefix_cache_hits": "prefix_cache_hits_total",
    "prompt_tokens": "prompt_tokens_total",
    "generation_tokens": "generation_tokens_total",
    "request_success": "request_success_total",
}
# Older names, used only when the current one is absent (V0 / early V1).
METRIC_ALIASES: dict[str, str] = {"gpu_cache_usage_perc": "kv_cache_usage_perc"}
# Fractions are averaged over engines (DP); counts and counters are summed.
AVERAGED_SERIES = frozenset({"kv_cache_usage_perc"})


def _plausible(series: str, value: float) -> bool:
    """A value the series can hold (core.plausible): finite and non-negative, a fraction at most
    1; NaN, inf or a negative count from a server is dropped, never stored as a sample."""
    high = 1.0 if series in AVERAGED_SERIES else math.inf
    return in_range(value, 0.0, high) is not None


def _base_name(name: str) -> str:
    base = name[5:] if name.startswith("vllm:") else name
    return base[:-6] if base.endswith("_total") else base


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """The lab's series from a /metrics text: summed over `engine`, `finished_reason` and any other
    label (kv_cache_usage_perc averaged over engines, kept raw 0..1).

    prometheus_client's parser names a counter family without "_total" and, when the TYPE line and
    the sample disagree, splits them into separate families, so this keys on each *sample's* name
    ("vllm:num_preemptions_total"), stripping "vllm:" and "_total"; "_created" samples are ignored.
    Lines of other metrics (histogram buckets are most of the text) are dropped before parsing.
    """
    wanted = set(METRIC_SERIES) | set(METRIC_ALIASES)
    kept = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if _base_name(name) in wanted:
            kept.append(line)
    if not kept:
        return {}
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    aliased: dict[str, float] = {}
    alias_counts: dict[str, int] = {}
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            base = _base_name(sample.name)
            value = float(sample.value)
            if not _plausible(METRIC_SERIES.get(base) or METRIC_ALIASES.get(base, ""), value):
                continue
            if base in METRIC_SERIES:
                series = METRIC_SERIES[base]
                sums[series] = sums.get(series, 0.0) + value
                counts[series] = counts.get(series, 0) + 1
            elif base in METRIC_ALIASES:
                series = METRIC_ALIASES[base]
                aliased[series] = aliased.get(series, 0.0) + value
                alias_counts[series] = alias_counts.get(series, 0) + 1
    for series, value in aliased.items():
        if series not in sums:
            sums[series], counts[series] = value, alias_counts[series]
    for series in AVERAGED_SERIES & set(sums):
        sums[series] /= counts[series]
    return sums


class MetricsSampler(Sampler):
    """vLLM's own view of the run from GET <base_url>/metrics: KV cache usage, queue, preemptions,
    prefix cache and token counters. Failures (refused, timeout, bad text) are counted in `failures`
    with the last one in `last_error`, never raised: a server under load may answer late.
    Proxies are bypassed (the server is local); the period is 0.5 s by default because every
    scrape makes the API server render its whole registry.
    """

    name = "metrics"

    def __init__(
        self,
        base_url: str,
        period: float = 0.5,
        timeout: float = 2.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(period)
        self.url = base_url.rstrip("/") + "/metrics"
        self.timeout = timeout
        self._headers = dict(headers or {})
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.scrapes = 0
        self.failures = 0
        self.last_error: str | None = None

    def fetch(self) -> str:
        req = urllib.request.Request(self.url, headers=self._headers)
        with self._opener.open(req, timeout=self.timeout) as resp:
            return resp.read().decode("utf-8", "replace")

    def sample(self, t: float) -> list[SampleRow]:
        self.scrapes += 1
        try:
            values = parse_vllm_metrics(self.fetch())
        except (OSError, urllib.error.URLError, ValueError) as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        return [SampleRow(t, series, value, "") for series, value in values.items()]
