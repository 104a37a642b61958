"""Which client is closer to the server's own clock? The lab, vLLM's benchmark, vLLM's histograms.

Starts the embedded engine once, warms it with one unmeasured run, then at each concurrency runs
`python -m tuning bench` (lab) and vLLM's serving benchmark (vllm) interleaved, A B B A ..., both
without their own warm-ups, so that every request the server finishes between two settled /metrics
reads (tuning.measure.telemetry.server_stats) is a measured request of that one client. For each
run it
prints the client's mean TTFT, E2EL and TPOT beside vLLM's histogram means over the same window
(time_to_first_token, e2e_request_latency, request_time_per_output_token), their difference
(client - server = HTTP, tokenizing, detokenizing and the client's own delay) and the server's mean
queue time; then the medians per tool.

    flock /tmp/engine.lock .venv/bin/python benchmarks/server_agreement.py [--pairs 1]
        [--concurrency 32] [--num-requests 64] [--input-len 64] [--output-len 64]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import ab_engine, common  # noqa: E402
from tuning.engine.embedded import embedded_spec  # noqa: E402
from tuning.measure.telemetry.server_stats import (  # noqa: E402
    MetricsReader,
    read_settled,
    tokens_counted,
    window_means,
)

LATENCIES = ("ttft", "e2el", "tpot")
NO_WARMUPS = ("--num-warmups", "0")  # the last one on each command line wins


def run_one(tool: str, load: common.Load, tmp: Path, i: int, metrics: MetricsReader) -> dict:
    """One client run between two settled /metrics reads; the client's and the server's means."""
    out = tmp / f"{tool}-{load.concurrency}-{i}.json"
    if tool == "lab":
        cmd = common.lab_argv(sys.executable, load, out) + list(NO_WARMUPS)
    else:
        cmd = common.vllm_argv(str(embedded_spec().command[0]), load, out, extra=NO_WARMUPS)
    before = read_settled(metrics).values
    result = ab_engine.run_client(cmd, tool, out)
    completed = int(result.get("completed") or 0)
    expected = int(result.get("total_output_tokens") or completed * load.output_len)
    target = tokens_counted(before or {}, expected, completed) if before else None
    after = read_settled(metrics, target).values
    server = window_means(before, after)
    row: dict[str, Any] = {"tool": tool, "concurrency": load.concurrency, "completed": completed}
    for lat in LATENCIES:
        client = float(result[f"mean_{lat}_ms"])
        theirs = server[f"server_mean_{lat}_ms"]
        row[f"client_{lat}_ms"] = client
        row[f"server_{lat}_ms"] = theirs
        row[f"gap_{lat}_ms"] = None if theirs is None else client - theirs
    row["server_queue_ms"] = server["server_mean_queue_ms"]
    row["server_finished"] = server["server_e2el_count"]
    return row


def _f(value: float | None, spec: str = "{:.1f}") -> str:
    return "—" if value is None else spec.format(value)


def print_row(row: dict[str, Any]) -> None:
    cells = [f"{row['tool']:5}", f"{row['concurrency']:>4}", f"{row['server_finished'] or 0:>5}"]
    for lat in LATENCIES:
        cells += [_f(row[f"client_{lat}_ms"]), _f(row[f"server_{lat}_ms"])]
        cells.append(_f(row[f"gap_{lat}_ms"], "{:+.1f}"))
    cells.append(_f(row["server_queue_ms"]))
    print(" | ".join(cells), flush=True)


def median_table(rows: list[dict[str, Any]]) -> None:
    """The README's table: per tool and concurrency, medians over the runs."""
    print("\nmedians (ms): client mean, vLLM's histogram mean, client - server")
    print(
        "| client | C | TTFT | server TTFT | gap | E2EL | server E2EL | gap | TPOT | server TPOT |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["tool"], row["concurrency"]), []).append(row)
    for (tool, c), mine in groups.items():

        def med(key: str, runs: list[dict[str, Any]] = mine) -> float | None:
            values = [r[key] for r in runs if r[key] is not None]
            return statistics.median(values) if values else None

        cells = [tool, str(c)]
        for lat in ("ttft", "e2el"):
            cells += [
                _f(med(f"client_{lat}_ms")),
                _f(med(f"server_{lat}_ms")),
                _f(med(f"gap_{lat}_ms"), "{:+.1f}"),
            ]
        cells += [_f(med("client_tpot_ms"), "{:.2f}"), _f(med("server_tpot_ms"), "{:.2f}")]
        print("| " + " | ".join(cells) + " |")


def main() -> int:
    args = ab_engine.ab_args(__doc__, pairs=1, concurrency=[32], num_requests=64, output_len=64)
    rows: list[dict[str, Any]] = []
    with ab_engine.embedded_server(args.concurrency, "server-agreement-") as server:
        metrics = MetricsReader(server.base_url)
        top = max(args.concurrency)
        run_one("lab", server.load(args, top, top), server.tmp, -1, metrics)
        print(
            f"healthy after {server.facts.time_to_healthy_s:.0f} s, warmed; {args.pairs} pair(s) "
            f"per concurrency, {args.num_requests} requests, {args.input_len} in / "
            f"{args.output_len} out, ignore_eos, no client warm-ups",
            flush=True,
        )
        print("tool | C | done | TTFT | srv | gap | E2EL | srv | gap | TPOT | srv | gap | queue")
        for c, i, tool in common.interleaved(args.concurrency, args.pairs, ("lab", "vllm")):
            row = run_one(tool, server.load(args, c, args.num_requests), server.tmp, i, metrics)
            rows.append(row)
            print_row(row)
            time.sleep(1)
    median_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
