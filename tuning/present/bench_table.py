"""The console table of a `bench` result: vLLM's `bench serve` layout, then the lab's own rows
(tokens a chunk and ITL per token beside vLLM's per-chunk ITL, steady state, client health, the
server's own view)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from tuning.measure.metrics import LATENCY_METRICS, PERCENTILES

_TITLES = {
    "ttft": "Time to First Token",
    "tpot": "Time per Output Token (excl. 1st token)",
    "itl": "Inter-token Latency",
    "e2el": "End-to-end Latency",
}


def _lags(lag: dict[str, Any]) -> str:
    return f"{1000 * lag['p99_s']:.2f} / {1000 * lag['max_s']:.2f}"


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def print_table(result: dict[str, Any], out: TextIO | None = None) -> None:
    """A short table in the shape of vLLM's, then the lab's client-health lines."""
    lab = result["lab"]
    line = "{:<40} {:<10}".format
    rows = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        line("Successful requests:", _fmt(result["completed"])),
        line("Failed requests:", _fmt(result["failed"])),
        line("Maximum request concurrency:", _fmt(result["max_concurrency"])),
        line("Benchmark duration (s):", _fmt(result["duration"])),
        line("Total input tokens:", _fmt(result["total_input_tokens"])),
        *(
            [line("Input lengths:", "approximate (the lab's tokenizer; no /tokenize)")]
            if lab.get("input_lens_approximate")
            else []
        ),
        line("Total generated tokens:", _fmt(result["total_output_tokens"])),
        line("Request throughput (req/s):", _fmt(result["request_throughput"])),
    ]
    if result.get("request_goodput") is not None:
        rows.append(line("Request goodput (req/s):", _fmt(result["request_goodput"])))
    rows += [
        line("Output token throughput (tok/s):", _fmt(result["output_throughput"])),
        line("Total token throughput (tok/s):", _fmt(result["total_token_throughput"])),
    ]
    for metric in LATENCY_METRICS:
        name = metric.upper()
        rows.append("{s:{c}^{n}}".format(s=_TITLES[metric], n=50, c="-"))
        rows.append(line(f"Mean {name} (ms):", _fmt(result[f"mean_{metric}_ms"])))
        rows.append(line(f"Median {name} (ms):", _fmt(result[f"median_{metric}_ms"])))
        for p in PERCENTILES:
            rows.append(line(f"P{p} {name} (ms):", _fmt(result[f"p{p}_{metric}_ms"])))
    client = lab["client"]
    steady = lab["steady_state"]
    rows += [
        "{s:{c}^{n}}".format(s="Lab", n=50, c="-"),
        line("Tokens per chunk (mean):", _fmt(result.get("mean_tokens_per_chunk"))),
        line(
            "ITL per token, mean / P99 (ms):",
            f"{_fmt(result.get('mean_itl_per_token_ms'))} / "
            f"{_fmt(result.get('p99_itl_per_token_ms'))}",
        ),
        line("Achieved concurrency (sum E2EL/dur):", _fmt(lab["achieved_concurrency"])),
        line("Steady-state output tok/s:", _fmt(steady.get("output_throughput"))),
        line("Client CPU (cores):", _fmt(client["client_cpu_util"])),
        line(
            "Event-loop lag p99 / max (ms):",
            f"{client['loop_lag_p99_ms']:.2f} / {client['loop_lag_max_ms']:.2f}",
        ),
    ]
    rows += _server_rows(lab.get("server") or {}, line)
    traffic = lab.get("traffic")
    if traffic:
        lag = traffic["dispatch_lag"]
        if traffic.get("target_request_rate"):
            rate = f"{traffic['achieved_request_rate']:.2f} / {traffic['target_request_rate']:g}"
            rows.append(line("Request rate achieved / target:", rate))
        if lag.get("planned"):
            rows.append(line("Dispatch lag p99 / max (ms):", _lags(lag)))
        for label in ("first_turn", "later_turns"):
            if traffic.get(f"requests_{label}"):
                name = f"Mean TTFT, {label.replace('_', ' ')} (ms):"
                rows.append(line(name, _fmt(traffic[f"mean_ttft_ms_{label}"])))
        if not traffic["schedule_kept"]:
            rows.append("WARNING: the client (or the concurrency cap) did not keep the schedule.")
    if result["failed"]:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(lab["failed_by_kind"].items()))
        rows.append(line("Failures by kind:", kinds))
    if lab["client_bound"]:
        rows.append(
            "WARNING: the client may be the bottleneck (busy core or lagging loop); "
            "the numbers are a lower bound for the server."
        )
    if lab["warmup_check"].get("slow_start"):
        rows.append(
            "WARNING: the first requests were clearly slower to first token than the "
            "rest: the server may not have been warm."
        )
    rows.append("=" * 50)
    print("\n".join(rows), file=out or sys.stdout)


def _server_rows(server: dict[str, Any], line: Any) -> list[str]:
    """The client's mean TTFT / E2EL beside vLLM's own histogram means for the same window."""
    lat = server.get("latency") or {}
    if lat.get("server_mean_ttft_ms") is None:
        return []
    rows = ["{s:{c}^{n}}".format(s="Server (vLLM /metrics)", n=50, c="-")]
    for key in ("ttft", "e2el"):
        name = key.upper()
        rows.append(line(f"Server mean {name} (ms):", _fmt(lat.get(f"server_mean_{key}_ms"))))
        rows.append(
            line(
                f"Client - server mean {name} (ms):", _fmt(lat.get(f"client_minus_server_{key}_ms"))
            )
        )
    rows.append(line("Server mean queue time (ms):", _fmt(lat.get("server_mean_queue_ms"))))
    tokens = server.get("tokens") or {}
    rows.append(line("Server output tokens (counter):", _fmt(tokens.get("server_output_tokens"))))
    if lat.get("flagged"):
        rows.append("WARNING: " + "; ".join(lat.get("reasons") or []))
    return rows
