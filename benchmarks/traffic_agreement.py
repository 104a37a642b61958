"""Open loop on the embedded engine: do the lab and `vllm bench serve --request-rate` agree?

Starts the embedded engine once, then runs `python -m tuning bench --request-rate R
--max-concurrency C` (lab) and vLLM's serving benchmark from the engine venv with `--request-rate R
--max-concurrency C` (vllm) on the same random workload (fixed lengths, ignore_eos, Poisson
arrivals, one unmeasured wave of C warm-ups), interleaved A B, B A, ...; pair i uses seed i for
both tools, so each tool meets several Poisson schedules (one schedule's bursts move the mean TTFT
more than any client does). Prints every run, each
tool's median and spread ((max - min) / median over its runs) of output throughput, request
throughput and mean TTFT, and the lab / vLLM ratio of the medians. Agreement: the ratio's distance
from 1 is within the larger of the two tools' spreads.

    .venv/bin/python benchmarks/traffic_agreement.py [--pairs 3] [--rate 2] [--num-requests 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import ab_engine, common  # noqa: E402
from benchmarks.agreement import run_one  # noqa: E402

KEYS = ("output_throughput", "request_throughput", "mean_ttft_ms")


def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart one tool's own runs land."""
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2.0, help="requests per second")
    parser.add_argument("--max-concurrency", type=int, default=16)
    parser.add_argument("--num-requests", type=int, default=60)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args()

    rate = f"{args.rate:g}"
    extra = {
        "lab": ["--request-rate", rate, "--max-concurrency", str(args.max_concurrency)],
        "vllm": ["--request-rate", rate, "--burstiness", "1.0"],
    }
    rows: list[dict[str, Any]] = []
    with ab_engine.embedded_server([args.max_concurrency], "traffic-agreement-") as server:
        load = server.load(args, args.max_concurrency, args.num_requests)
        print(
            f"healthy after {server.facts.time_to_healthy_s:.0f} s; {args.pairs} pairs, Poisson at "
            f"{rate} req/s capped at {args.max_concurrency}, {args.num_requests} requests, "
            f"{args.input_len} in / {args.output_len} out, ignore_eos",
            flush=True,
        )
        print(f"{'tool':5} {'out tok/s':>9} {'req/s':>7} {'TTFT ms':>8} {'failed':>6}")
        for _c, i, tool in common.interleaved([args.max_concurrency], args.pairs, ("lab", "vllm")):
            seeded = {k: [*v, "--seed", str(i)] for k, v in extra.items()}
            row = run_one(tool, load, server.tmp, i, seeded, KEYS)
            rows.append(row)
            print(
                f"{tool:5} {row['output_throughput']:>9.1f} {row['request_throughput']:>7.3f} "
                f"{row['mean_ttft_ms']:>8.1f} {row['failed'] or 0:>6}",
                flush=True,
            )
            time.sleep(1)
    print(
        f"\n{'metric':20} {'lab median':>10} {'spread':>7} {'vLLM median':>11} {'spread':>7}"
        f" {'lab/vLLM':>9} {'agree':>6}"
    )
    summary: dict[str, Any] = {}
    for key in KEYS:
        lab = [r[key] for r in rows if r["tool"] == "lab"]
        ref = [r[key] for r in rows if r["tool"] == "vllm"]
        ratio = statistics.median(lab) / statistics.median(ref)
        allowed = max(spread(lab), spread(ref))
        agree = abs(ratio - 1.0) <= allowed
        summary[key] = {
            "lab_median": statistics.median(lab),
            "lab_spread": spread(lab),
            "vllm_median": statistics.median(ref),
            "vllm_spread": spread(ref),
            "ratio": ratio,
            "agree": agree,
        }
        print(
            f"{key:20} {statistics.median(lab):>10.2f} {spread(lab):>7.1%} "
            f"{statistics.median(ref):>11.2f} {spread(ref):>7.1%} {ratio:>9.3f} "
            f"{'yes' if agree else 'NO':>6}"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "summary": summary}, indent=2))
    return 0 if all(s["agree"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
