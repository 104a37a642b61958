"""Does the lab measure what vLLM's own benchmark measures? Same server, same workload, interleaved.

Starts the embedded engine once, then at each concurrency runs `python -m tuning bench` (A) and
vLLM's serving benchmark from the engine venv (B) interleaved, A B B A A B ..., and prints each run
and the ratios of the medians: output throughput (lab / vLLM; >= 1.00 means the lab's client costs
the engine no throughput), mean and p99 TTFT and mean TPOT (lab / vLLM; <= 1.05 is the target).

    .venv/bin/python benchmarks/agreement.py [--pairs 3] [--concurrency 32 128] [--num-requests 256]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import ab_engine, common  # noqa: E402
from tuning.engine.embedded import embedded_spec  # noqa: E402


def run_one(
    tool: str,
    load: common.Load,
    tmp: Path,
    i: int,
    extra: dict[str, list[str]] | None = None,
    keys: tuple[str, ...] = common.AGREEMENT_KEYS,
) -> dict[str, Any]:
    """One client run against the shared server; its result JSON as a row. `extra`: more flags
    per tool ("lab" / "vllm"), e.g. an open loop's request rate."""
    out = tmp / f"{tool}-{load.concurrency}-{i}.json"
    more = (extra or {}).get(tool, [])
    if tool == "lab":
        cmd = common.lab_argv(sys.executable, load, out, extra=more)
    else:
        cmd = common.vllm_argv(str(embedded_spec().command[0]), load, out, extra=more)
    return {
        **common.result_row(ab_engine.run_client(cmd, tool, out), keys),
        "tool": tool,
        "concurrency": load.concurrency,
    }


def main() -> int:
    args = ab_engine.ab_args(
        __doc__, pairs=4, concurrency=[32, 128], num_requests=256, output_len=128
    )
    rows: list[dict[str, Any]] = []
    with ab_engine.embedded_server(args.concurrency, "agreement-") as server:
        print(
            f"healthy after {server.facts.time_to_healthy_s:.0f} s; {args.pairs} pairs per "
            f"concurrency, {args.num_requests} requests, {args.input_len} in / "
            f"{args.output_len} out, ignore_eos",
            flush=True,
        )
        print(f"{'tool':5} {'C':>4} {'tok/s':>9} {'TTFT ms':>9} {'p99 TTFT':>9} {'TPOT ms':>8}")
        for c, i, tool in common.interleaved(args.concurrency, args.pairs, ("lab", "vllm")):
            row = run_one(tool, server.load(args, c, args.num_requests), server.tmp, i)
            rows.append(row)
            print(
                f"{tool:5} {c:>4} {row['output_throughput']:>9.0f} "
                f"{row['mean_ttft_ms']:>9.1f} {row['p99_ttft_ms']:>9.1f} "
                f"{row['mean_tpot_ms']:>8.2f}",
                flush=True,
            )
            time.sleep(1)
    print("\nratios of medians (lab / vLLM); targets: throughput >= 1.00, latencies <= 1.05")
    print(f"{'C':>4} {'throughput':>11} {'mean TTFT':>10} {'p99 TTFT':>9} {'mean TPOT':>10}")
    summary = common.ratio_summary(rows, common.AGREEMENT_KEYS)
    for c, result in summary.items():
        ratio = result["ratio"]
        print(
            f"{c:>4} {ratio['output_throughput']:>11.3f} {ratio['mean_ttft_ms']:>10.3f} "
            f"{ratio['p99_ttft_ms']:>9.3f} {ratio['mean_tpot_ms']:>10.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
