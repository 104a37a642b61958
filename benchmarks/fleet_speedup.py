"""Wall time of one experiment on the fleet against the same experiment one run at a time.

    .venv/bin/python benchmarks/fleet_speedup.py [--values 8] [--slots 4] [--start-delay 60]
                                                 [--repeats 2] [--local]

V values of max-num-seqs, one repeat each, against the fake vLLM (tests/fakes/fake_vllm.py) with a
start delay like a real vLLM start (60-100 s to healthy on an H200), in interleaved pairs (so both
sides see the same machine load): serially (`python -m tuning experiment`, no fleet), then with
`--fleet ray` on a local Ray cluster of N slots that this script starts beforehand (an existing
cluster, as on a GPU box), and with `--local` also `--fleet local --slots N` (the lab starts and
stops Ray itself, so its start is in the time). Prints each wall time, each pair's ratio parallel
/ serial and their median; the target at V=8, N=4 is at most 0.3. Needs `make fleet`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.engines import fake_command, fake_settings_env  # noqa: E402
from tuning.decide.fleet.cluster import start_node  # noqa: E402


def experiment(home: Path, values: int, delay: float, fleet: list[str]) -> tuple[float, dict]:
    """One experiment through the CLI; (wall seconds, its JSON answer)."""
    # The fault rides in the engine's command (stored with the experiment), so it reaches servers
    # on any node; the lab's environment reaches only servers this machine's Ray started.
    env = {
        **os.environ,
        **fake_settings_env(home),
        "TUNING_LAB_ENGINE_COMMAND": shlex.join(fake_command(f"start_delay={delay}")),
    }
    argv = [sys.executable, "-m", "tuning", "experiment", "--param", "max-num-seqs"]
    argv += ["--values", ",".join(str(2 * (i + 1)) for i in range(values))]
    argv += ["--num-requests", "8", "--concurrency", "2", "--input-len", "16"]
    argv += ["--output-len", "8", "--num-warmups", "0", "--json", *fleet]
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"experiment failed ({done.returncode}):\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    runs = subprocess.run(
        [sys.executable, "-m", "tuning", "runs", "--json", "--db", str(home / "lab.db")],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(runs.stdout)
    healthy = [r["time_to_healthy_s"] or 0 for r in rows]
    if any(r["status"] != "done" for r in rows) or min(healthy) < delay:
        raise SystemExit(f"not every run measured with the start delay: {rows}")
    return wall, answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=8)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--start-delay", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved serial/fleet pairs")
    parser.add_argument("--local", action="store_true", help="also time --fleet local per pair")
    args = parser.parse_args()
    ratios: list[float] = []
    local_ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        home = Path(tmp)
        # The cluster runs throughout, as on a GPU box: its start is not in any experiment's time.
        node = start_node(args.slots, num_cpus=1)
        on_ray = ["--fleet", "ray", "--ray-address", node.address, "--slots", str(args.slots)]
        try:
            for rep in range(args.repeats):  # serial and fleet interleaved: same machine load
                serial, _ = experiment(home / f"serial{rep}", args.values, args.start_delay, [])
                fleet, _ = experiment(home / f"ray{rep}", args.values, args.start_delay, on_ray)
                ratios.append(fleet / serial)
                line = f"pair {rep + 1}: serial {serial:.1f} s, fleet {fleet:.1f} s"
                if args.local:
                    local_flags = ["--fleet", "local", "--slots", str(args.slots)]
                    local, _ = experiment(
                        home / f"local{rep}", args.values, args.start_delay, local_flags
                    )
                    local_ratios.append(local / serial)
                    line += f", fleet local (Ray started by the lab) {local:.1f} s"
                print(f"{line}, ratio {ratios[-1]:.2f}", flush=True)
        finally:
            node.stop()
    print(f"V={args.values} N={args.slots} start delay {args.start_delay:g} s, load {load()}")
    print(
        f"ratio fleet (running cluster) / serial: median {statistics.median(ratios):.2f} "
        f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)}; target <= 0.3)"
    )
    if local_ratios:
        print(f"ratio fleet local / serial: median {statistics.median(local_ratios):.2f}")
    return 0


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
