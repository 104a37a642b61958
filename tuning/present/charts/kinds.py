"""What the lab draws, by name: chart kinds and titles, the sample series, and the note every
memory chart carries. No Altair here, so the CLI can list the kinds without loading it."""

from __future__ import annotations

from collections.abc import Iterable

CHART_KINDS = ("throughput", "latency", "cdf", "memory", "kv", "knee")
CHART_TITLES = {
    "throughput": "Output throughput per value",
    "latency": "Latency percentiles per value",
    "knee": "Metric vs parameter value",
    "cdf": "Latency distributions (CDF)",
    "memory": "Memory over run time",
    "kv": "KV-cache usage over run time",
}
PREALLOCATION_NOTE = (
    "vLLM pre-allocates the KV cache at start, so used memory barely moves "
    "under load while KV usage climbs."
)
# Memory series, most telling first, with what each measures.
MEMORY_SERIES: tuple[tuple[str, str], ...] = (
    ("gpu_tree_bytes", "GPU memory of the server's processes"),
    ("gpu_used_bytes", "GPU memory used (whole device)"),
    ("tree_rss_bytes", "RSS of the server's process tree"),
)
# Every sample series a chart draws (the comparison's and the live panel's).
DASHBOARD_SERIES: tuple[str, ...] = (
    "tree_rss_bytes",
    "gpu_tree_bytes",
    "gpu_used_bytes",
    "kv_cache_usage_perc",
    "generation_tokens_total",
    "num_requests_running",
    "num_requests_waiting",
)
SERVER_AXIS = "run time (s since server start)"
LOAD_AXIS = "s since the load started"


def memory_series_for(available: Iterable[str]) -> str | None:
    """The most telling memory series a run has: the server's GPU memory, else host RSS."""
    have = set(available)
    return next((name for name, _ in MEMORY_SERIES if name in have), None)
