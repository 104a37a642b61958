"""Open loop against an instant server: does the lab's client keep a target request rate?

Starts the instant stub (benchmarks/stub_server.py --whole, its own process: each response in one
write, so the stub costs the shared cores as little as it can), then for each target rate sends a
synthetic plan of `seconds * rate` Poisson arrivals (tuning.measure.loadgen.schedule, raw
transport) and
prints the planned rate, the achieved one (first-turn dispatches over their span), the dispatch
lag, the client's CPU per request and the machine's 1-minute load average when the rate ran (the
stub and the client share the machine with whatever else runs). The issue's bar: achieved within
3% of the target at 10, 100 and 1,000 req/s.

    .venv/bin/python benchmarks/traffic_rate.py [--rates 10,100,1000] [--seconds 3] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuning.engine.embedded import model_dir  # noqa: E402
from tuning.engine.launch import free_port  # noqa: E402
from tuning.measure.loadgen.schedule import dispatch_lags, plan_workload, run_schedule_sync  # noqa: E402
from tuning.measure.traffic import Arrival, LengthDist, WorkloadSpec, materialize  # noqa: E402
from tuning.measure.traffic.arrival import gap_stats  # noqa: E402
from tuning.measure.traffic.workload import LocalTokenizer  # noqa: E402

MODEL = "stub"


def wait_health(base_url: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the stub at {base_url} never answered /health")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100,1000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    tok = LocalTokenizer(model_dir())
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    stub = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "stub_server.py"), "--port", str(port)]
        + ["--model", MODEL, "--whole"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_health(base_url)
        print(
            f"{'target':>8} {'n':>6} {'planned':>9} {'achieved':>9} {'ratio':>7} "
            f"{'lag p99 ms':>10} {'cpu us/req':>10} {'load':>5} {'failed':>6}"
        )
        rates = [float(r) for r in args.rates.split(",")]
        for rate in [r for _ in range(args.repeats) for r in rates]:
            n = max(10, int(rate * args.seconds))
            spec = WorkloadSpec(
                input=LengthDist(mean=8),
                output=LengthDist(mean=4),
                num_requests=n,
                arrival=Arrival("open", rate=rate),
            )
            plan = materialize(spec, tok)
            planned = gap_stats([r.offset_s or 0.0 for r in plan.requests])["rate"]
            res = run_schedule_sync(
                base_url, MODEL, plan, [], plan_workload(plan, 0), transport="raw"
            )
            starts = sorted(r.start for r in res.records)
            achieved = (len(starts) / starts[-1]) if starts[-1] > 0 else float("inf")
            lag = dispatch_lags(res.records)
            failed = sum(not r.ok for r in res.records)
            print(
                f"{rate:>8g} {n:>6} {planned:>9.2f} {achieved:>9.2f} {achieved / rate:>7.3f} "
                f"{1000 * lag.get('p99_s', 0.0):>10.2f} {1e6 * res.client_cpu_s / n:>10.0f} "
                f"{os.getloadavg()[0]:>5.1f} {failed:>6}",
                flush=True,
            )
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
