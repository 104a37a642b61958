"""How many streamed output tokens per second can a client absorb per CPU-second it burns, on
/v1/completions and on /v1/chat/completions?

The lab's client and vLLM's own (`vllm bench serve`, from the engine venv: its `openai` backend
on completions, `openai-chat` on chat) run against the same instant streaming stub
(benchmarks/stub_server.py, a separate process: the bare asyncio protocol, or with `--stub
aiohttp` a framework server), at several concurrencies, both endpoints and every client
interleaved, the order swapped every repeat (A B, B A), so drift on a shared machine hits all
alike. Each client runs as its own process; this script samples that process's CPU time with
psutil every 10 ms and integrates it over the client's measured window only (first dispatch ..
first dispatch + duration, both taken from the client's result file on the system-wide monotonic
clock), so interpreter start-up, vLLM's import, tokenizer loading and warm-ups are not charged to
either client. The stub's own CPU per token is sampled too: a server that is the bottleneck sets
the tok/s, and a client can only change that through the server's cost.

    .venv/bin/python benchmarks/client_capacity.py [--quick] [--concurrency 32 256 1024]
        [--endpoints completions chat] [--stub bare|aiohttp]

Reported per run: output tok/s, client CPU (cores), tok per client CPU-second = the client's
absorb capacity per core, and the stub's CPU µs per token. Then, per endpoint and concurrency,
the medians per client and the ratios lab / vLLM: capacity (tok/CPU-s, the acceptance figure:
>= 1.0) and throughput (tok/s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import common  # noqa: E402
from tuning.engine.launch import free_port  # noqa: E402

LAB_PYTHON = REPO / ".venv" / "bin" / "python"
ENGINE_PYTHON = REPO / ".engine" / "venv" / "bin" / "python"
TOKENIZER_DIR = REPO / ".engine" / "tiny-llama"
MODEL = "tiny"
SAMPLE_S = 0.010
CLIENTS = ("lab-aiohttp", "lab-raw", "vllm")
ENDPOINTS = ("completions", "chat")


@dataclass
class Run:
    client: str
    endpoint: str
    concurrency: int
    repeat: int
    requests: int
    output_tokens: int
    duration_s: float
    output_tok_s: float
    client_cpu_s: float
    client_cores: float
    tok_per_cpu_s: float
    failed: int
    wall_s: float
    stub_us_per_token: float


def wait_health(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"stub at {url} did not become healthy")


class CpuSampler:
    """(perf_counter, user+system CPU seconds) of one process, every 10 ms, until it exits."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.points: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cpu = self.proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                return
            self.points.append((time.perf_counter(), cpu.user + cpu.system))
            self._stop.wait(SAMPLE_S)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def cpu_between(self, t0: float, t1: float) -> float:
        """CPU seconds used in [t0, t1], linearly interpolated between samples."""
        if len(self.points) < 2:
            raise RuntimeError("too few CPU samples; the run was too short")
        ts = np.array([p[0] for p in self.points])
        cs = np.array([p[1] for p in self.points])
        if t1 > ts[-1] + 0.05 or t0 < ts[0] - 0.05:
            raise RuntimeError("the measured window lies outside the sampled time")
        return float(np.interp(t1, ts, cs) - np.interp(t0, ts, cs))


def window(client: str, result: dict[str, Any]) -> tuple[float, float]:
    """The measured window on the monotonic clock, from the client's own result file."""
    if client.startswith("lab"):
        t0 = float(result["lab"]["client"]["t0_perf_counter"])
    else:
        t0 = float(min(result["start_times"]))  # vLLM stores perf_counter() starts
    return t0, t0 + float(result["duration"])


def run_once(
    client: str,
    endpoint: str,
    base_url: str,
    c: int,
    n: int,
    repeat: int,
    args: argparse.Namespace,
    tmp: Path,
    stub: psutil.Process,
) -> Run:
    out = tmp / f"{client}-{endpoint}-{c}-{repeat}.json"
    load = common.Load(
        base_url, MODEL, TOKENIZER_DIR, c, n, args.input_len, args.output_len, endpoint
    )
    if client.startswith("lab"):
        transport = client.partition("-")[2] or "aiohttp"
        cmd = common.lab_argv(
            str(LAB_PYTHON), load, out, entry=common.LAB_MODULE, extra=("--transport", transport)
        )
    else:
        cmd = common.vllm_argv(str(ENGINE_PYTHON), load, out, extra=("--save-detailed",))
    log = tmp / f"{client}-{endpoint}-{c}-{repeat}.log"
    started = time.perf_counter()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=str(REPO),
            env=common.client_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        sampler = CpuSampler(proc.pid).start()
        server = CpuSampler(stub.pid).start()
        try:
            code = proc.wait(timeout=args.run_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RuntimeError(
                f"{client} at C={c} on {endpoint} did not finish in {args.run_timeout} s; "
                f"log: {log}"
            ) from None
        finally:
            sampler.stop()
            server.stop()
    wall = time.perf_counter() - started
    if code != 0 or not out.exists():
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{client} at C={c} on {endpoint} exited {code}:\n{tail}")
    result = json.loads(out.read_text())
    t0, t1 = window(client, result)
    cpu = sampler.cpu_between(t0, t1)
    duration = t1 - t0
    tokens = int(result["total_output_tokens"])
    return Run(
        client=client,
        endpoint=endpoint,
        concurrency=c,
        repeat=repeat,
        requests=n,
        output_tokens=tokens,
        duration_s=duration,
        output_tok_s=tokens / duration,
        client_cpu_s=cpu,
        client_cores=cpu / duration,
        tok_per_cpu_s=tokens / cpu if cpu > 0 else 0.0,
        failed=int(result.get("failed") or 0),
        wall_s=wall,
        stub_us_per_token=server.cpu_between(t0, t1) / tokens * 1e6 if tokens else 0.0,
    )


def run_order(
    concurrencies: list[int], repeats: int, endpoints: list[str], clients: list[str]
) -> list[tuple[int, int, str, str]]:
    """(C, repeat, endpoint, client) in run order: every endpoint and client once a repeat, the
    endpoints and the clients each in reverse order every other repeat (A B, B A)."""
    out = []
    for c in concurrencies:
        for i in range(repeats):
            flip = i % 2 == 1
            for endpoint in reversed(endpoints) if flip else endpoints:
                for client in reversed(clients) if flip else clients:
                    out.append((c, i, endpoint, client))
    return out


def summarize(runs: list[Run], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per endpoint and C: each client's medians, and lab / vLLM for capacity and throughput."""
    labs = [c for c in args.clients if c != "vllm"]
    print(
        "\nmedians per endpoint and concurrency: output tok/s | tok per client CPU-second"
        + (" || lab / vLLM: capacity (tok/CPU-s) | throughput" if "vllm" in args.clients else "")
    )
    header = f"{'endpoint':<12} {'C':>5} " + " ".join(f"{name:>20}" for name in args.clients)
    if "vllm" in args.clients:
        header += " ||" + " ".join(f"{name + '/vllm':>22}" for name in labs)
    print(header)
    rows: list[dict[str, Any]] = []
    keys = ("output_tok_s", "tok_per_cpu_s", "stub_us_per_token")
    for endpoint in args.endpoints:
        mine = [asdict(r) for r in runs if r.endpoint == endpoint]
        med = common.medians(mine, keys, by="client")
        for c in args.concurrency:
            row: dict[str, Any] = {"endpoint": endpoint, "concurrency": c}
            cells = []
            for client in args.clients:
                got = med.get(c, {}).get(client)
                if got is None:
                    cells.append("n/a")
                    continue
                row[f"{client}_tok_s"] = got["output_tok_s"]
                row[f"{client}_tok_per_cpu_s"] = got["tok_per_cpu_s"]
                row[f"{client}_stub_us_per_token"] = got["stub_us_per_token"]
                cells.append(f"{got['output_tok_s']:>8.0f} | {got['tok_per_cpu_s']:>8.0f}")
            line = f"{endpoint:<12} {c:>5} " + " ".join(f"{cell:>20}" for cell in cells)
            if "vllm" in args.clients and "vllm_tok_s" in row:
                parts = []
                for client in labs:
                    if f"{client}_tok_s" not in row:
                        continue
                    cap = row[f"{client}_tok_per_cpu_s"] / row["vllm_tok_per_cpu_s"]
                    tput = row[f"{client}_tok_s"] / row["vllm_tok_s"]
                    row[f"{client}_over_vllm"] = cap
                    row[f"{client}_tok_s_over_vllm"] = tput
                    parts.append(f"{cap:>10.2f} | {tput:>9.2f}")
                line += " ||" + " ".join(f"{p:>22}" for p in parts)
            rows.append(row)
            print(line)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, shorter runs")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument(
        "--min-requests",
        type=int,
        default=None,
        help="requests per run at least (default 2000, 600 with --quick)",
    )
    parser.add_argument(
        "--waves",
        type=int,
        default=None,
        help="requests per run at least waves x C (default 4, 2 with --quick)",
    )
    parser.add_argument("--stub-itl-ms", type=float, default=0.0)
    parser.add_argument(
        "--stub",
        choices=["bare", "aiohttp"],
        default="bare",
        help="the stub's server: the bare asyncio protocol, or aiohttp's web server",
    )
    parser.add_argument(
        "--endpoints",
        nargs="+",
        default=list(ENDPOINTS),
        choices=list(ENDPOINTS),
        help="measured interleaved, each with its vLLM backend (openai, openai-chat)",
    )
    parser.add_argument("--run-timeout", type=float, default=300.0)
    parser.add_argument(
        "--clients",
        nargs="+",
        default=list(CLIENTS),
        choices=list(CLIENTS),
        help="lab-aiohttp and lab-raw are the lab's two transports",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    min_requests = args.min_requests or (600 if args.quick else 2000)
    waves = args.waves or (2 if args.quick else 4)
    if "vllm" in args.clients and not ENGINE_PYTHON.exists():
        print(
            f"no engine venv at {ENGINE_PYTHON}: measuring the lab's client only", file=sys.stderr
        )
        args.clients = [c for c in args.clients if c != "vllm"]
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        print(
            f"no tokenizer at {TOKENIZER_DIR}: run `python -m tuning engine setup`", file=sys.stderr
        )
        return 2

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    stub = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "benchmarks" / "stub_server.py"),
            "--port",
            str(port),
            "--model",
            MODEL,
            "--itl-ms",
            str(args.stub_itl_ms),
            *(["--aiohttp"] if args.stub == "aiohttp" else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    runs: list[Run] = []
    try:
        wait_health(base_url)
        print(
            f"stub {base_url} ({args.stub}, pid {stub.pid}); {os.cpu_count()} CPUs; "
            f"{args.input_len} in / {args.output_len} out; repeats {repeats}; "
            f"endpoints {', '.join(args.endpoints)}",
            flush=True,
        )
        print(
            f"{'client':<12} {'endpoint':<12} {'C':>5} {'rep':>3} {'reqs':>6} {'out tok/s':>10} "
            f"{'cores':>6} {'tok/CPU-s':>10} {'stub µs/tok':>11} {'failed':>6}",
            flush=True,
        )
        server = psutil.Process(stub.pid)
        with tempfile.TemporaryDirectory(prefix="client-capacity-") as tmpdir:
            tmp = Path(tmpdir)
            for c, rep, endpoint, client in run_order(
                args.concurrency, repeats, args.endpoints, args.clients
            ):
                n = max(min_requests, waves * c)
                run = run_once(client, endpoint, base_url, c, n, rep, args, tmp, server)
                runs.append(run)
                print(
                    f"{run.client:<12} {endpoint:<12} {c:>5} {rep:>3} {n:>6} "
                    f"{run.output_tok_s:>10.0f} {run.client_cores:>6.2f} "
                    f"{run.tok_per_cpu_s:>10.0f} {run.stub_us_per_token:>11.2f} {run.failed:>6}",
                    flush=True,
                )
    finally:
        stub.terminate()
        try:
            stub.wait(5)
        except subprocess.TimeoutExpired:
            stub.kill()
            stub.wait()

    summary = summarize(runs, args)
    if args.json:
        args.json.write_text(
            json.dumps({"runs": [asdict(r) for r in runs], "summary": summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
