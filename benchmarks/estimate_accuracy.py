"""How close an experiment's printed estimate comes to its wall time: estimate / actual, round after
round, on the fake vLLM with a scripted start (the timing claim tests/tuning/experiment/
test_estimate_fake.py made with a 30 % bound, which failed beside a CPU-heavy job; the test now
checks the model against the stored runs, and the accuracy is measured here).

Each round, in a lab home of its own: a 2-run experiment of the engine (the history the model
reads), then a 6-run one (max-num-seqs 2,4 x 3 repeats); the wall time runs from the moment its
`estimate:` line is printed to the end of the command, which is what the line promises. The fake's
start time alternates between the two `--start-delay` values, round by round (interleaved), so a
machine that slows down mid-benchmark slows both.

    .venv/bin/python benchmarks/estimate_accuracy.py [--rounds 4] [--start-delay 2 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.engines import fake_settings_env  # noqa: E402

LOAD = ["--num-requests", "8", "--concurrency", "4", "--input-len", "8", "--output-len", "8"]
LOAD += ["--num-warmups", "0", "--start-timeout", "120"]


def experiment(home: Path, delay: float, repeats: int) -> tuple[float, float]:
    """One experiment over max-num-seqs 2,4: (its estimate's seconds, seconds from the estimate
    line to the end)."""
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,4", "--json"]
    args += ["--repeats", str(repeats), *LOAD, "--db", str(home / "lab.db")]
    env = {**os.environ, **fake_settings_env(home, f"start_delay={delay:g}")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    printed_at = None
    for raw in proc.stderr:  # tqdm redraws with \r: the words are the last part of a line
        if printed_at is None and raw.split("\r")[-1].startswith("estimate: "):
            printed_at = time.monotonic()
    out = proc.stdout.read()
    if proc.wait(timeout=600) != 0 or printed_at is None:
        raise SystemExit(f"the experiment failed (exit {proc.returncode})")
    estimate = json.loads(out.strip().splitlines()[-1])["estimate"]["seconds"]
    return float(estimate), time.monotonic() - printed_at


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--rounds", type=int, default=4)
    cli.add_argument("--start-delay", type=float, nargs="+", default=[2.0, 6.0])
    args = cli.parse_args()
    ratios: dict[float, list[float]] = {d: [] for d in args.start_delay}
    print(f"{'round':>5} {'start':>6} {'estimate s':>11} {'actual s':>9} {'est/actual':>10}")
    for i in range(args.rounds):
        order = args.start_delay if i % 2 == 0 else list(reversed(args.start_delay))
        for delay in order:
            with tempfile.TemporaryDirectory(prefix="estimate-bench-") as tmp:
                home = Path(tmp)
                experiment(home, delay, 1)  # the history
                estimate, actual = experiment(home, delay, 3)
            ratio = estimate / actual
            ratios[delay].append(ratio)
            print(f"{i + 1:>5} {delay:>5g}s {estimate:>11.1f} {actual:>9.1f} {ratio:>10.2f}")
    print()
    for delay, got in ratios.items():
        print(
            f"start {delay:g} s: estimate / actual median {statistics.median(got):.2f} "
            f"(min {min(got):.2f}, max {max(got):.2f}; the acceptance: within 0.70-1.30)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
