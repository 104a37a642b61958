"""A verdict on each run's own health: did the client keep C requests in flight, did the server see
them, do the token counts agree, does the client's latency match the server's own histograms? A run
that fails these is flagged, not silently compared.

Client minus server (issue 11): vLLM's histograms time a request from its arrival in the engine's
front end (after the HTTP request is parsed and tokenized) to its first token / its end, so the
client's mean is the server's plus transport, tokenization, detokenization and the client's own
delay. A run is flagged when that gap in mean TTFT or mean E2EL exceeds max(SERVER_GAP_MS,
SERVER_GAP_SHARE x the server's mean), or is negative by more than SERVER_NEGATIVE_MS (the two
sides did not time the same requests). Only judged when the server finished exactly the requests
the client completed in the window (otherwise the means describe different requests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tuning.measure.loadgen.client import LoadResult
from tuning.measure.metrics import (
    Columns,
    achieved_concurrency,
    columns,
    steady_state,
    warmup_check,
)
from tuning.measure.telemetry.server_stats import MetricsReader, read_settled, window_means
from tuning.measure.traffic.workload import Workload, WorkloadError, server_root

CLIENT_CPU_LIMIT = 0.9  # a core this busy can delay reads and dispatches
LOOP_LAG_P99_LIMIT_MS = 20.0  # an event loop this late delays every chunk it times
TOKEN_TOLERANCE = 0.01
SERVER_GAP_MS = 50.0  # client - server mean TTFT / E2EL above this (and the share) is flagged
SERVER_GAP_SHARE = 0.25  # ... as a share of the server's own mean
SERVER_NEGATIVE_MS = 5.0  # client below server by more than this: not the same requests
SERVER_LATENCIES = ("ttft", "e2el", "itl", "tpot")  # compared; queue time is the server's alone
FLAGGED_LATENCIES = ("ttft", "e2el")


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


def scrape_counters(base_url: str, settle: bool = True) -> dict[str, float] | None:
    """vLLM's counters and latency histograms from /metrics, re-read until they stop moving
    (`server_stats.read_settled`, at most 5 s) unless `settle` is False; None when the server has
    none. The load generator makes these reads itself around its measured phase
    (`server_stats=True`); this is for a caller that needs one outside it."""
    try:
        reader = MetricsReader(server_root(base_url))
    except WorkloadError:
        return None
    return read_settled(reader).values if settle else reader()


def _client_means(cols: Columns) -> dict[str, float | None]:
    """The client's mean TTFT, E2EL, ITL and TPOT (ms) over its successful requests (metrics.py's
    definitions)."""
    ok = cols.ok
    out_tokens = cols.output_tokens[ok]
    long = out_tokens > 1
    tpot = (cols.e2el[ok][long] - cols.ttft[ok][long]) / (out_tokens[long] - 1)
    values = {"ttft": cols.ttft[ok], "e2el": cols.e2el[ok], "itl": cols.itl, "tpot": tpot}
    return {k: float(np.mean(v)) * 1000.0 if v.size else None for k, v in values.items()}


def server_latency(
    cols: Columns,
    server_before: Mapping[str, float] | None,
    server_after: Mapping[str, float] | None,
) -> dict[str, Any]:
    """The server's own mean latencies over the window beside the client's, their difference, and
    whether the difference is beyond the bound (see the module docstring)."""
    out: dict[str, Any] = window_means(server_before, server_after)
    client = _client_means(cols)
    completed = int(cols.ok.sum())
    finished = out["server_e2el_count"]
    comparable = None if finished is None else finished == completed == out["server_ttft_count"]
    reasons: list[str] = []
    for lat in SERVER_LATENCIES:
        mine, theirs = client[lat], out[f"server_mean_{lat}_ms"]
        out[f"client_mean_{lat}_ms"] = mine
        gap = None if mine is None or theirs is None else mine - theirs
        out[f"client_minus_server_{lat}_ms"] = gap
        if comparable and gap is not None and theirs is not None and lat in FLAGGED_LATENCIES:
            bound = max(SERVER_GAP_MS, SERVER_GAP_SHARE * theirs)
            if gap > bound or gap < -SERVER_NEGATIVE_MS:
                reasons.append(
                    f"client - server mean {lat.upper()} {gap:+.0f} ms "
                    f"(server {theirs:.0f} ms; bound {bound:.0f} ms)"
                )
    if comparable is False:
        out["not_comparable"] = (
            f"the server finished {finished} requests in the window, the client completed "
            f"{completed}: the means are of different requests"
        )
    out.update(comparable=comparable, flagged=bool(reasons), reasons=reasons)
    return out


def server_summary(health: Mapping[str, Any]) -> dict[str, float | None]:
    """The summary keys of a run's server-side means and client - server differences."""
    lat = health.get("server_latency") or {}
    keys = [f"server_mean_{k}_ms" for k in (*SERVER_LATENCIES, "queue")]
    keys += [f"client_minus_server_{k}_ms" for k in SERVER_LATENCIES]
    return {k: lat.get(k) for k in keys}


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
    The server's counters default to the load generator's own settled reads (`server_stats=True`).
    """
    if counters_before is None and counters_after is None:
        counters_before, counters_after = load.server_before, load.server_after
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
        "tokens": {
            **reconcile_tokens(client_tokens, counters_before, counters_after),
            "reads": load.server_reads,  # how the /metrics reads settled (reads, waited_s)
        },
        "server_latency": server_latency(cols, counters_before, counters_after),
        "warmup_failed": load.warmup_failed,
        "cancelled": load.cancelled,
    }
