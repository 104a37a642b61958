"""What sampling a server's process tree costs the runner: the lab's ProcessTreeSampler against a
plain psutil walk of the same tree (children(recursive=True), then memory_info and cpu_percent of
each), in CPU milliseconds per sample and as a share of one core at the sampler's 100 ms period.

The fast test suite once asserted "< 5 ms of CPU a sample" with a wall-clock-free but machine-bound
number, and failed on a busy box; tests/tuning/telemetry/test_proctree.py now checks why it is
cheap (open /proc files re-read, no process-list walk between rescans) and the cost is measured
here, side by side: the two samplers alternate in blocks, round after round, over one real tree:
this process, a parent with its EngineCore-like child (tests/fakes/proc_tree.py) and `--extra`
sleeping children.

    .venv/bin/python benchmarks/sampler_cost.py [--rounds 5] [--samples 200] [--extra 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.proc_tree import Tree  # noqa: E402
from tuning.measure.telemetry.proctree import ProcessTreeSampler  # noqa: E402

PERIOD_S = 0.1  # the runner's ProcessTreeSampler period (tuning.experiment.run_unit)


def psutil_walk(root: int) -> Callable[[], int]:
    """The obvious sampler: walk the tree each time, read each process through psutil."""
    cached: dict[int, psutil.Process] = {}

    def sample() -> int:
        total = 0
        top = psutil.Process(root)
        for proc in [top, *top.children(recursive=True)]:
            proc = cached.setdefault(proc.pid, proc)  # cpu_percent needs the previous reading
            try:
                total += proc.memory_info().rss
                proc.cpu_percent(None)
            except psutil.Error:
                continue
        return total

    return sample


def lab_sampler(root: int) -> Callable[[], int]:
    sampler = ProcessTreeSampler(root, period=PERIOD_S)
    return lambda: len(sampler.sample(0.0))


def cpu_ms_per_sample(sample: Callable[[], int], n: int) -> float:
    cpu0 = time.thread_time()
    for _ in range(n):
        sample()
    return (time.thread_time() - cpu0) / n * 1000.0


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--samples", type=int, default=200)
    cli.add_argument("--extra", type=int, default=2, help="more children in the tree")
    args = cli.parse_args()
    sleepers = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        for _ in range(args.extra)
    ]
    try:
        with Tree():
            root = os.getpid()  # the tree: this process, the sleepers, the parent and its child
            samplers = {"lab": lab_sampler(root), "psutil walk": psutil_walk(root)}
            for sample in samplers.values():
                sample()  # first readings, opened files
            got: dict[str, list[float]] = {name: [] for name in samplers}
            for i in range(args.rounds):
                names = list(samplers) if i % 2 == 0 else list(reversed(samplers))
                for name in names:
                    got[name].append(cpu_ms_per_sample(samplers[name], args.samples))
    finally:
        for s in sleepers:
            s.kill()
            s.wait()
    lab, walk = statistics.median(got["lab"]), statistics.median(got["psutil walk"])
    print(f"{'sampler':<12} {'CPU ms/sample (median)':>23} {'share of a core at 100 ms':>26}")
    for name, value in (("lab", lab), ("psutil walk", walk)):
        print(f"{name:<12} {value:>23.3f} {value / (PERIOD_S * 1000) * 100:>25.2f}%")
    print(f"\nlab / psutil walk: {lab / walk:.2f} (rounds: {args.rounds} x {args.samples} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
