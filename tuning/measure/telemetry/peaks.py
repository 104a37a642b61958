"""A run's peaks and counter deltas from its samples: memory peaks over the whole server life,
load-driven peaks and deltas inside the load window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from core.records import SampleRow

# Series summed over their labels at one instant before taking the max (several GPUs).
_SUMMED_AT_T = ("gpu_used_bytes", "gpu_tree_bytes")
_MAXED = {
    "tree_rss_bytes": "peak_tree_rss_bytes",
    "tree_cpu_percent": "peak_tree_cpu_percent",
    "kv_cache_usage_perc": "peak_kv_cache_usage_perc",
    "num_requests_running": "max_num_requests_running",
    "num_requests_waiting": "max_num_requests_waiting",
}
_DELTAS = {
    "num_preemptions_total": "preemptions",
    "generation_tokens_total": "generation_tokens_delta",
    "prompt_tokens_total": "prompt_tokens_delta",
    "request_success_total": "request_success_delta",
    "prefix_cache_queries_total": "prefix_cache_queries_delta",
    "prefix_cache_hits_total": "prefix_cache_hits_delta",
}
_MEMORY_KEYS = ("peak_tree_rss_bytes", "peak_gpu_used_bytes", "peak_gpu_tree_bytes")
PEAK_KEYS: tuple[str, ...] = (
    "peak_tree_rss_bytes",
    "peak_tree_cpu_percent",
    "peak_gpu_used_bytes",
    "peak_gpu_used_over_baseline_bytes",
    "peak_gpu_tree_bytes",
    "load_peak_tree_rss_bytes",
    "load_peak_gpu_used_bytes",
    "load_peak_gpu_tree_bytes",
    "peak_kv_cache_usage_perc",
    "max_num_requests_running",
    "max_num_requests_waiting",
    *_DELTAS.values(),
    "prefix_cache_hit_rate",
)


class PeakTracker:
    """Running peaks and counter deltas, fed in time order; O(1) memory for long runs."""

    def __init__(self) -> None:
        self._max: dict[str, float] = {}
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._acc: dict[str, tuple[float, float]] = {}  # series -> (t, running sum at t)

    def _bump(self, series: str, value: float) -> None:
        if value > self._max.get(series, -math.inf):
            self._max[series] = value

    def add(self, rows: Iterable[SampleRow]) -> None:
        for row in rows:
            s = row.series
            if s in _SUMMED_AT_T:
                t_sum = self._acc.get(s)
                if t_sum is not None and t_sum[0] == row.t:
                    self._acc[s] = (row.t, t_sum[1] + row.value)
                else:
                    if t_sum is not None:
                        self._bump(s, t_sum[1])
                    self._acc[s] = (row.t, row.value)
            elif s in _MAXED:
                self._bump(s, row.value)
            elif s in _DELTAS:
                self._first.setdefault(s, row.value)
                self._last[s] = row.value

    def result(self, gpu_baseline: Mapping[str, int] | None = None) -> dict[str, float | None]:
        """All of PEAK_KEYS, None where the run had no such samples."""
        maxes = dict(self._max)
        for s, (_, acc) in self._acc.items():
            if acc > maxes.get(s, -math.inf):
                maxes[s] = acc
        out: dict[str, float | None] = dict.fromkeys(PEAK_KEYS)
        for series, key in _MAXED.items():
            out[key] = maxes.get(series)
        out["peak_gpu_used_bytes"] = maxes.get("gpu_used_bytes")
        out["peak_gpu_tree_bytes"] = maxes.get("gpu_tree_bytes")
        if gpu_baseline and out["peak_gpu_used_bytes"] is not None:
            out["peak_gpu_used_over_baseline_bytes"] = out["peak_gpu_used_bytes"] - float(
                sum(gpu_baseline.values())
            )
        for series, key in _DELTAS.items():
            if series in self._last:
                out[key] = self._last[series] - self._first[series]
        _hit_rate(out)
        return out


def _hit_rate(out: dict[str, float | None]) -> None:
    queries = out["prefix_cache_queries_delta"]
    hits = out["prefix_cache_hits_delta"]
    out["prefix_cache_hit_rate"] = (
        hits / queries if queries and hits is not None and queries > 0 else None
    )


def peaks(
    rows: Iterable[SampleRow],
    gpu_baseline: Mapping[str, int] | None = None,
    window: tuple[float, float] | None = None,
    settled: tuple[Mapping[str, float] | None, Mapping[str, float] | None] = (None, None),
) -> dict[str, float | None]:
    """Peaks of a run's samples, in any order; every key of PEAK_KEYS, None where unknown.

    Memory peaks (tree RSS; device and tree GPU memory, summed over GPUs at each instant) span all
    rows, so the startup peak (weights, KV allocation, profiling) counts. With `window` = the load's
    (start, end) in the rows' t: the load-driven keys (CPU, KV usage, max running/waiting, counter
    deltas, prefix cache hit rate) are taken inside it, counter deltas from the last sample at or
    before its start to the first at or after its end (so a scrape period at either edge is not
    lost), and load_peak_* give the memory peaks inside it. Without a window the whole run counts
    and load_peak_* are None. Deltas are last - first of vLLM's cumulative counters; the hit rate
    is delta hits / delta queries (tokens). Over-baseline assumes every sample covers the devices
    in `gpu_baseline`. `settled` = vLLM's counters read just before the first measured request and
    after the last, once settled (tuning.measure.telemetry.server_stats): a counter both reads have
    is
    taken from them instead of the samples, whose half-second period and clock mapping can miss a
    short load (issue 22: a 3-second multi-turn run stored 0 prefix-cache hits).
    """
    ordered = sorted(rows, key=lambda r: r.t)
    tracker = PeakTracker()
    tracker.add(ordered)
    out = tracker.result(gpu_baseline)
    if window is None:
        return _unobserved_gauges(out)
    w0, w1 = window
    inside = [r for r in ordered if w0 <= r.t <= w1]
    in_tracker = PeakTracker()
    in_tracker.add(inside)
    win = in_tracker.result(gpu_baseline)
    for key in (
        "peak_tree_cpu_percent",
        "peak_kv_cache_usage_perc",
        "max_num_requests_running",
        "max_num_requests_waiting",
    ):
        out[key] = win[key]
    for key in _MEMORY_KEYS:
        out["load_" + key] = win[key]
    for series, key in _DELTAS.items():
        values = [r for r in ordered if r.series == series]
        before = [r.value for r in values if r.t <= w0]
        after = [r.value for r in values if r.t >= w1]
        during = [r.value for r in values if w0 <= r.t <= w1]
        first = before[-1] if before else (during[0] if during else None)
        last = after[0] if after else (during[-1] if during else None)
        out[key] = None if first is None or last is None else last - first
    out.update(settled_deltas(*settled))
    _hit_rate(out)
    return _unobserved_gauges(out)


def settled_deltas(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None
) -> dict[str, float]:
    """The counter deltas (keys of _DELTAS' values) that both settled reads carry."""
    if not before or not after:
        return {}
    return {
        key: after[series] - before[series]
        for series, key in _DELTAS.items()
        if series in before and series in after
    }


_SNAPSHOT_GAUGES = (
    "peak_kv_cache_usage_perc",
    "max_num_requests_running",
    "max_num_requests_waiting",
)


def _unobserved_gauges(out: dict[str, float | None]) -> dict[str, float | None]:
    """vLLM's gauges are a snapshot of its last engine step, and a starved API server answers a
    scrape only in a gap of its output loop, when the engine may hold nothing: on 2 busy cores six
    of six scrapes said 0 running while 4,096 tokens were generated. A peak KV usage of 0 % for a
    run that used the cache would be false: when no scrape saw a request running while tokens
    were generated, the gauges' peaks are unknown (None), not 0."""
    generated = out["generation_tokens_delta"]
    if out["max_num_requests_running"] == 0 and generated is not None and generated > 0:
        for key in _SNAPSHOT_GAUGES:
            out[key] = None
    return out
