"""A verdict on each run's own health: did the client keep C requests in flight, did the server see
them, do the token counts agree? A run that fails these is flagged, not silently compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuning.loadgen.client import LoadResult
from tuning.metrics import achieved_concurrency, columns, steady_state, warmup_check
from tuning.server import http_get
from tuning.telemetry.prom import parse_vllm_metrics
from tuning.workload import Workload, WorkloadError, server_root

CLIENT_CPU_LIMIT = 0.9  # a core this busy can delay reads and dispatches
LOOP_LAG_P99_LIMIT_MS = 20.0  # an event loop this late delays every chunk it times
TOKEN_TOLERANCE = 0.01


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def server_inflight(
    samples: Sequence[Mapping[str, Any]], t0: float | None, t1: float | None
) -> dict[str, float | None]:
    """Mean / max of the server's running and running + waiting requests inside [t0, t1]."""
    if t0 is None or t1 is None:
        return {"running_mean": None, "running_max": None, "inflight_mean": None}
    running: dict[float, float] = {}
    waiting: dict[float, float] = {}
    for s in samples:
        if t0 <= s["t_s"] <= t1:
            if s["series"] == "num_requests_running":
                running[s["t_s"]] = s["value"]
            elif s["series"] == "num_requests_waiting":
                waiting[s["t_s"]] = s["value"]
    if not running:
        return {"running_mean": None, "running_max": None, "inflight_mean": None}
    both = [running[t] + waiting.get(t, 0.0) for t in running]
    return {
        "running_mean": _mean(list(running.values())),
        "running_max": max(running.values()),
        "inflight_mean": _mean(both),
    }


def reconcile_tokens(
    client_tokens: int,
    server_before: Mapping[str, float] | None,
    server_after: Mapping[str, float] | None,
) -> dict[str, Any]:
    """Client `usage` totals against the delta of vLLM's generation-token counter."""
    key = "generation_tokens_total"
    if not server_before or not server_after or key not in server_before or key not in server_after:
        return {
            "client_output_tokens": client_tokens,
            "server_output_tokens": None,
            "difference": None,
            "agree": None,
        }
    server = server_after[key] - server_before[key]
    diff = client_tokens - server
    agree = abs(diff) <= max(1.0, TOKEN_TOLERANCE * max(server, 1.0))
    return {
        "client_output_tokens": client_tokens,
        "server_output_tokens": server,
        "difference": diff,
        "agree": agree,
    }


def scrape_counters(base_url: str) -> dict[str, float] | None:
    """One /metrics read (vLLM's counters) at a phase edge; None when the server has none."""
    try:
        status, text = http_get(server_root(base_url) + "/metrics", timeout=5.0)
    except (OSError, WorkloadError):
        return None
    return parse_vllm_metrics(text) if status == 200 else None


def client_limits(load: LoadResult) -> list[str]:
    """Why the client itself may have set the numbers (a busy core, a lagging event loop); empty
    when neither. `bench` and the runner's health verdict judge the client by the same limits."""
    reasons: list[str] = []
    if load.client_cpu_util > CLIENT_CPU_LIMIT:
        reasons.append(f"client CPU {load.client_cpu_util:.0%} of a core")
    if load.loop_lag_p99_ms > LOOP_LAG_P99_LIMIT_MS:
        reasons.append(f"event-loop lag p99 {load.loop_lag_p99_ms:.0f} ms")
    return reasons


def run_health(
    load: LoadResult,
    workload: Workload,
    samples: Sequence[Mapping[str, Any]],
    load_offset_s: float,
    counters_before: Mapping[str, float] | None = None,
    counters_after: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Everything stored in `health_json`, plus the headline keys the summary keeps as columns.

    `load_offset_s` maps the load generator's clock (0 = first measured dispatch) onto the samples'
    clock (0 = server start), so the steady-state window can be matched with the server's queue.
    """
    cols = columns(load.records)
    c = workload.concurrency
    achieved = achieved_concurrency(cols, load.duration_s)
    steady = steady_state(cols, c, load.inflight or None)
    if steady["found"]:
        t0, t1 = steady["t0"] + load_offset_s, steady["t1"] + load_offset_s
    else:
        t0, t1 = load_offset_s, load_offset_s + load.duration_s
    server = server_inflight(samples, t0, t1)
    reasons = client_limits(load)
    if not steady["found"] and load.records:
        # Ramp-up and drain lower the whole-run figure; never reaching ~C at all is the symptom.
        reasons.append(
            f"never held {steady['need_inflight']} of {c} requests in flight "
            f"(achieved concurrency {achieved or 0:.1f})"
        )
    client_tokens = int(sum(r.output_tokens or 0 for r in load.records))
    warm = warmup_check(cols, c)
    return {
        "target_concurrency": c,
        "achieved_concurrency": achieved,
        "server_running_mean": server["running_mean"],
        "server_running_max": server["running_max"],
        "server_inflight_mean": server["inflight_mean"],
        # Shown, not judged: requests between the engine and the client (detokenising, HTTP,
        # the next request's tokenising) are in flight for the client but not in vLLM's queues.
        "server_inflight_share": (
            server["inflight_mean"] / c if server["inflight_mean"] is not None and c else None
        ),
        "client_cpu_util": load.client_cpu_util,
        "loop_lag_mean_ms": load.loop_lag_mean_ms,
        "loop_lag_p99_ms": load.loop_lag_p99_ms,
        "client_bound": bool(reasons),
        "client_bound_reasons": reasons,
        "steady_state": steady,
        "steady_output_throughput": steady["output_throughput"],
        "warmup_check": warm,
        "slow_start": warm["slow_start"],
        "tokens": reconcile_tokens(client_tokens, counters_before, counters_after),
        "warmup_failed": load.warmup_failed,
        "cancelled": load.cancelled,
    }
