"""Does the lab measure what vLLM's own benchmark measures? Same server, same workload, interleaved.

Starts the embedded engine once, then at each concurrency runs `python -m tuning bench` (A) and
vLLM's serving benchmark from the engine venv (B) interleaved, A B B A A B ..., and prints each run and
the ratios of the medians: output throughput (lab / vLLM; >= 1.00 means the lab's client costs the
engine no throughput), mean and p99 TTFT and mean TPOT (lab / vLLM; <= 1.05 is the target).

    .venv/bin/python benchmarks/agreement.py [--pairs 3] [--concurrency 32 128] [--num-requests 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.client_capacity import VLLM_LAUNCHER  # noqa: E402
from tuning.engine import embedded_spec, model_dir  # noqa: E402
from tuning.params import build_launch  # noqa: E402
from tuning.server import ServerProcess  # noqa: E402

KEYS = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms")


def lab_cmd(base_url: str, c: int, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tuning",
        "bench",
        "--base-url",
        base_url,
        "--model",
        "tiny",
        "--concurrency",
        str(c),
        "--num-requests",
        str(args.num_requests),
        "--input-len",
        str(args.input_len),
        "--output-len",
        str(args.output_len),
        "--num-warmups",
        str(c),
        "--tokenizer",
        str(model_dir()),
        "--result-json",
        str(out),
        "--quiet",
    ]


def vllm_cmd(base_url: str, c: int, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        str(embedded_spec().command[0]),
        "-c",
        VLLM_LAUNCHER,
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        "tiny",
        "--tokenizer",
        str(model_dir()),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.output_len),
        "--ignore-eos",
        "--max-concurrency",
        str(c),
        "--num-prompts",
        str(args.num_requests),
        "--num-warmups",
        str(c),
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--temperature",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--result-dir",
        str(out.parent),
        "--result-filename",
        out.name,
    ]


def run_one(
    tool: str, base_url: str, c: int, args: argparse.Namespace, tmp: Path, i: int
) -> dict[str, Any]:
    out = tmp / f"{tool}-{c}-{i}.json"
    cmd = lab_cmd(base_url, c, args, out) if tool == "lab" else vllm_cmd(base_url, c, args, out)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{tool} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result = json.loads(out.read_text())
    row = {k: float(result[k]) for k in KEYS}
    row.update(
        tool=tool, concurrency=c, completed=result["completed"], failed=result.get("failed", 0)
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--num-requests", type=int, default=256)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args()

    spec = embedded_spec()
    config = {**spec.baseline, "max-num-seqs": max(256, max(args.concurrency))}
    launch = build_launch(
        spec.command,
        spec.model,
        spec.served_model_name,
        config,
        spec.backend,
        load_format=spec.load_format,
        base_env=spec.env,
    )
    tmp = Path(tempfile.mkdtemp(prefix="agreement-"))
    server = ServerProcess(launch, tmp / "server.log")
    print(f"starting the embedded engine ({' '.join(launch.argv[3:])})", flush=True)
    server.start()
    rows: list[dict[str, Any]] = []
    try:
        facts = server.wait_healthy(600)
        print(
            f"healthy after {facts.time_to_healthy_s:.0f} s; {args.pairs} pairs per "
            f"concurrency, {args.num_requests} requests, {args.input_len} in / "
            f"{args.output_len} out, ignore_eos",
            flush=True,
        )
        print(f"{'tool':5} {'C':>4} {'tok/s':>9} {'TTFT ms':>9} {'p99 TTFT':>9} {'TPOT ms':>8}")
        for c in args.concurrency:
            for i in range(args.pairs):
                # Interleaved, and which tool goes first alternates (A B, B A, ...), so a drift
                # of the shared machine or an order effect cannot favour either tool.
                for tool in ("lab", "vllm") if i % 2 == 0 else ("vllm", "lab"):
                    row = run_one(tool, launch.base_url, c, args, tmp, i)
                    rows.append(row)
                    print(
                        f"{tool:5} {c:>4} {row['output_throughput']:>9.0f} "
                        f"{row['mean_ttft_ms']:>9.1f} {row['p99_ttft_ms']:>9.1f} "
                        f"{row['mean_tpot_ms']:>8.2f}",
                        flush=True,
                    )
                    time.sleep(1)
    finally:
        server.stop()
    print("\nratios of medians (lab / vLLM); targets: throughput >= 1.00, latencies <= 1.05")
    print(f"{'C':>4} {'throughput':>11} {'mean TTFT':>10} {'p99 TTFT':>9} {'mean TPOT':>10}")
    summary = {}
    for c in args.concurrency:
        med = {
            tool: {
                k: statistics.median(
                    r[k] for r in rows if r["tool"] == tool and r["concurrency"] == c
                )
                for k in KEYS
            }
            for tool in ("lab", "vllm")
        }
        ratio = {k: med["lab"][k] / med["vllm"][k] for k in KEYS}
        summary[c] = {"median": med, "ratio": ratio}
        print(
            f"{c:>4} {ratio['output_throughput']:>11.3f} {ratio['mean_ttft_ms']:>10.3f} "
            f"{ratio['p99_ttft_ms']:>9.3f} {ratio['mean_tpot_ms']:>10.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
