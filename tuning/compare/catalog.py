"""The metric catalogue: every number a comparison judges, its unit, which way is better, the scale
a change of it is read on (a ratio, or a difference in its unit) and how it is computed (vLLM's
definitions), in one place, so the table, the charts, the exports, the report and the decision
agree (as AIPerf's metric classes keep a metric's unit, direction and formula together)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuning.engine.params import PARAMS

# Which way is an improvement; "neither" for a number that is a state, not a score (how full the
# KV cache was at peak: lower is more headroom, higher is more requests served at once).
Direction = Literal["lower", "higher", "neither"]
# How a change is read: a ratio (log scale, shown in %) or a difference in the metric's unit, for
# counts and fractions whose baseline is often 0 or near it (0 preemptions -> 2 is not "+inf %",
# and 0.02 % -> 0.04 % KV usage is not "+100 %").
Scale = Literal["ratio", "difference"]
DIFFERENCE_SCALE = frozenset({"peak_kv_cache_usage_perc", "preemptions", "failed"})

# Registry name of each workload parameter -> Workload field name.
WORKLOAD_PARAMS: dict[str, str] = {
    name: name.replace("-", "_") for name, p in PARAMS.items() if p.kind == "workload"
}
# Workload fields that are not a tunable parameter and not part of what makes a workload different.
WORKLOAD_IGNORED = frozenset({"request_timeout_s", "stall_timeout_s"})


@dataclass(frozen=True)
class Metric:
    """One row of the comparison table; `better` says which way is an improvement."""

    key: str
    label: str
    unit: str
    better: Direction
    formula: str
    group: str
    scale: Scale = "ratio"

    @property
    def direction_text(self) -> str:
        """'lower is better', 'higher is better' or 'no better direction'."""
        return "no better direction" if self.better == "neither" else f"{self.better} is better"

    @property
    def definition(self) -> str:
        """'label (unit, lower is better): formula', as the page and the report list it; a
        difference-scale metric says so."""
        scale = ", compared as a difference" if self.scale == "difference" else ""
        return f"{self.label} ({self.unit}, {self.direction_text}{scale}): {self.formula}"


_LAT_FORMULA = {
    "ttft": "TTFT = first token's arrival − request start, per request",
    "tpot": "TPOT = (E2EL − TTFT) / (output tokens − 1), per request with > 1 output token",
    "itl": "ITL = every gap between consecutive streamed chunks, pooled over requests",
    "e2el": "E2EL = last token's arrival − request start, per request",
}
LATENCIES = tuple(_LAT_FORMULA)
_ITL_PER_TOKEN = (
    "ITL per token = each gap between chunks / the tokens a later chunk of its request carries "
    "((output tokens − 1) / (chunks − 1)), pooled over requests; ITL itself at one token a chunk"
)
# Shown beside the metrics, never judged (no direction is better): the tokens a chunk carries. ITL
# is per chunk, so sides whose chunks differ (--stream-interval, speculative decoding) cannot be
# compared on ITL, only on ITL per token (tuning.compare.chunks says so next to ITL).
TOKENS_PER_CHUNK = "mean_tokens_per_chunk"
TOKENS_PER_CHUNK_FORMULA = "successful output tokens (usage) / their streamed content chunks"
# Latency statistic -> how a label names it.
STATS: dict[str, str] = {"mean": "mean", "median": "p50", "p99": "p99"}
_DURATION = "(first dispatch → last completion)"
_GOODPUT = "requests meeting every SLO / duration (vLLM's goodput; TPOT 0 for 1-token outputs)"
_KV_USAGE = (
    "max of vLLM's kv_cache_usage_perc during the load (0–1; lower = more headroom, higher = more "
    "requests held at once: neither is better by itself)"
)

# key, label, unit, better, formula, group: a data table, one metric a line.
# fmt: off
_TABLE: tuple[tuple[str, str, str, Direction, str, str], ...] = (
    ("output_throughput", "output throughput", "tok/s", "higher",
     f"successful output tokens / {_DURATION}", "throughput"),
    ("request_throughput", "request throughput", "req/s", "higher",
     f"completed requests / {_DURATION}", "throughput"),
    ("request_goodput", "goodput", "req/s", "higher", _GOODPUT, "throughput"),
    *(
        (f"{stat}_{lat}_ms", f"{STATS[stat]} {lat.upper()}", "ms", "lower",
         f"{_LAT_FORMULA[lat]}; {STATS[stat]} over the run", "latency")
        for lat in LATENCIES
        for stat in STATS
    ),
    *(
        (f"{stat}_itl_per_token_ms", f"{STATS[stat]} ITL per token", "ms", "lower",
         f"{_ITL_PER_TOKEN}; {STATS[stat]} over the run", "latency")
        for stat in STATS
    ),
    ("peak_gpu_tree_bytes", "peak GPU memory (server tree)", "bytes", "lower",
     "max over samples of device memory held by the server's processes", "memory"),
    ("peak_tree_rss_bytes", "peak RSS (server tree)", "bytes", "lower",
     "max over samples of the resident memory of the server's process tree", "memory"),
    ("peak_kv_cache_usage_perc", "peak KV-cache usage", "fraction", "neither", _KV_USAGE, "memory"),
    ("kv_cache_tokens", "KV capacity", "tokens", "higher",
     "tokens the KV cache holds, from vLLM's startup log", "memory"),
    ("preemptions", "preemptions", "count", "lower",
     "increase of vllm:num_preemptions_total during the load", "health"),
    ("time_to_healthy_s", "time to healthy", "s", "lower",
     "server start → first successful GET /health", "health"),
    ("failed", "failed requests", "count", "lower",
     "requests that errored, timed out or ended early", "health"),
)
# fmt: on

METRICS: tuple[Metric, ...] = tuple(
    Metric(*row, scale="difference" if row[0] in DIFFERENCE_SCALE else "ratio") for row in _TABLE
)
METRIC_BY_KEY: dict[str, Metric] = {x.key: x for x in METRICS}


def metric_label(key: object) -> str:
    """A metric key in the words users read: its catalog label (`output_throughput` -> "output
    throughput"); an unknown key with its underscores as spaces. --json keeps the keys."""
    metric = METRIC_BY_KEY.get(str(key))
    return metric.label if metric is not None else str(key).replace("_", " ")
