"""Does the lab measure what vLLM's own benchmark measures? Same server, same workload, interleaved.

Starts the embedded engine once, then at each concurrency runs `python -m tuning bench` (A) and
vLLM's serving benchmark from the engine venv (B) interleaved, A B B A A B ..., and prints each run
and the ratios of the medians: output throughput (lab / vLLM; >= 1.00 means the lab's client costs
the engine no throughput), mean and p99 TTFT and mean TPOT (lab / vLLM; <= 1.05 is the target).

    .venv/bin/python benchmarks/agreement.py [--pairs 3] [--concurrency 32 128] [--num-requests 256]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import common  # noqa: E402
from tuning.engine import embedded_spec, model_dir  # noqa: E402
from tuning.server import ServerProcess  # noqa: E402


@contextlib.contextmanager
def embedded_engine(max_num_seqs: int, prefix: str) -> Iterator[tuple[Any, float, Path]]:
    """The embedded engine started once and healthy: (its launch, seconds to healthy, a scratch
    folder for the runs' result files and the server log)."""
    spec = embedded_spec()
    launch = spec.launch({**spec.baseline, "max-num-seqs": max_num_seqs})
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    print(f"starting the embedded engine ({' '.join(launch.argv[3:])})", flush=True)
    with ServerProcess(launch, tmp / "server.log") as server:
        yield launch, server.wait_healthy(600).time_to_healthy_s, tmp


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
    done = subprocess.run(
        cmd, cwd=REPO, env=common.client_env(), capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{tool} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return {
        **common.result_row(json.loads(out.read_text()), keys),
        "tool": tool,
        "concurrency": load.concurrency,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--num-requests", type=int, default=256)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    seqs = max(256, max(args.concurrency))
    with embedded_engine(seqs, "agreement-") as (launch, healthy_s, tmp):
        print(
            f"healthy after {healthy_s:.0f} s; {args.pairs} pairs per "
            f"concurrency, {args.num_requests} requests, {args.input_len} in / "
            f"{args.output_len} out, ignore_eos",
            flush=True,
        )
        print(f"{'tool':5} {'C':>4} {'tok/s':>9} {'TTFT ms':>9} {'p99 TTFT':>9} {'TPOT ms':>8}")
        for c, i, tool in common.interleaved(args.concurrency, args.pairs, ("lab", "vllm")):
            load = common.Load(
                base_url=launch.base_url,
                model="tiny",
                tokenizer=model_dir(),
                concurrency=c,
                num_requests=args.num_requests,
                input_len=args.input_len,
                output_len=args.output_len,
            )
            row = run_one(tool, load, tmp, i)
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
