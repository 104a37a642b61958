"""The newcomer's first experiment: max-num-seqs 2 vs 16 on the embedded engine, a short workload,
repeated until the verdict is decided. The home page's button and `tuning-lab demo` plan the
same thing, so what a user sees in the browser is what the CLI prints."""

from __future__ import annotations

from pathlib import Path

from tuning.engine.spec import EngineSpec
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

PARAM = "max-num-seqs"
VALUES = [2, 16]
# Measured (docs/evidence/demo.md, 2026-12-07): 2.0 min for 10 runs, 4 starts and 6 switches.
# Where the demo's time went on the shared 2-core machine when every run restarted the engine
# (measured, README "First: the demo"): a start (three Python processes importing vLLM and torch
# one after the other, --enforce-eager already on) was ~90 % of a run: 197 s of a 214 s run at
# load 7; warm-ups and the 32 requests took 18 s. The time is in the number of runs (4 at least,
# 10 at most), not in the requests. Its repeats now pause resident servers where the machine has
# the RAM for two (tuning.engine.pause: each value's server starts once, a real restart every
# third round, the other runs switch): paused runs took 2.5-4.8 s against 28-34 s restarted in
# benchmarks/time_to_decision.py's embedded runs (docs/evidence/numbers.md).
# C=16 so that max-num-seqs 2 queues 14 requests: a difference large against run-to-run noise.
WORKLOAD = Workload(num_requests=32, concurrency=16, input_len=32, output_len=32, num_warmups=4)
# The stopping rule's looks at 2, 3 and 5 runs a side (alpha split over the three), under the time
# budget every experiment has by default (tuning.experiment.size): 10 runs at ~214 s fit in it.
MAX_REPEATS = 5
NAME = "Demo: max-num-seqs 2 vs 16 (repeated until decided)"
# Measured on the shared 2-core machine (README, "First: the demo"), not a promise: the home
# page's button and `tuning-lab demo --help` say it.
MEASURED = "about 2 minutes on 2 idle CPU cores, more on a busy machine"
BUTTON = f"Run the demo ({MEASURED})"


def plan_demo(db_path: str | Path, engine: EngineSpec, *, author: str = "", host: str = "") -> int:
    """Write the demo experiment (not started); returns its id."""
    return plan_experiment(
        db_path,
        ExperimentSpec.build(
            param=PARAM,
            values=list(VALUES),
            workload=WORKLOAD,
            engine=engine,
            repeats=1,
            name=NAME,
            author=author,
            host=host,
            auto=AutoRepeats(max_repeats=MAX_REPEATS, budget_minutes=DEFAULT_BUDGET_MINUTES),
        ),
    )
