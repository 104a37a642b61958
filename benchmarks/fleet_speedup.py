"""Wall time of one experiment on the fleet against the same experiment one run at a time.

    .venv/bin/python benchmarks/fleet_speedup.py [--values 8] [--slots 4] [--start-delay 60]

V values of max-num-seqs, one repeat each, against the fake vLLM (tests/fakes/fake_vllm.py) with a
start delay like a real vLLM start (60-100 s to healthy on an H200): first serially (`python -m
tuning experiment`, no fleet), then with `--fleet ray` on a local Ray cluster of N slots that this
script starts beforehand (an existing cluster, as on a GPU box), then with `--fleet local --slots
N` (the lab starts and stops Ray itself, so its start is in the time). Prints each wall time and
the ratios parallel / serial; the target at V=8, N=4 is at most 0.3. Needs `make fleet`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.engines import fake_command, fake_settings_env  # noqa: E402
from tuning.fleet.cluster import start_node  # noqa: E402


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
    parser.add_argument("--skip-local", action="store_true", help="leave out --fleet local")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        home = Path(tmp)
        serial, _ = experiment(home / "serial", args.values, args.start_delay, [])
        print(f"serial: {serial:.1f} s for {args.values} values", flush=True)
        node = start_node(args.slots, num_cpus=1)
        try:
            on_cluster, _ = experiment(
                home / "ray",
                args.values,
                args.start_delay,
                ["--fleet", "ray", "--ray-address", node.address, "--slots", str(args.slots)],
            )
        finally:
            node.stop()
        print(f"fleet on a running cluster ({args.slots} slots): {on_cluster:.1f} s", flush=True)
        local = None
        if not args.skip_local:
            local, _ = experiment(
                home / "local",
                args.values,
                args.start_delay,
                ["--fleet", "local", "--slots", str(args.slots)],
            )
            print(f"fleet local, Ray started by the lab: {local:.1f} s", flush=True)
    print(f"V={args.values} N={args.slots} start delay {args.start_delay:g} s")
    print(f"ratio fleet (running cluster) / serial: {on_cluster / serial:.2f}  (target <= 0.3)")
    if local is not None:
        print(f"ratio fleet local (incl. Ray start) / serial: {local / serial:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
