"""The newcomer's first experiment: max-num-seqs 2 vs 16 on the embedded engine, a short workload,
repeated until the verdict is decided. The home page's button and `python -m tuning demo` plan the
same thing, so what a user sees in the browser is what the CLI prints."""

from __future__ import annotations

from pathlib import Path

from tuning.engine import EngineSpec
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.workload import Workload

PARAM = "max-num-seqs"
VALUES = [2, 16]
# C=16 so that max-num-seqs 2 queues 14 requests: a difference the verdict decides in a few runs.
WORKLOAD = Workload(num_requests=32, concurrency=16, input_len=32, output_len=32, num_warmups=4)
MAX_REPEATS = 5  # the stopping rule's looks at 2, 3 and 5 runs a side: a few minutes at most
NAME = "Demo: max-num-seqs 2 vs 16 (repeated until decided)"


def plan_demo(db_path: str | Path, engine: EngineSpec, *, author: str = "", host: str = "") -> int:
    """Write the demo experiment (not started); returns its id."""
    return plan_experiment(
        db_path,
        param=PARAM,
        values=list(VALUES),
        workload=WORKLOAD,
        engine=engine,
        repeats=1,
        name=NAME,
        author=author,
        host=host,
        auto=AutoRepeats(max_repeats=MAX_REPEATS),
    )
