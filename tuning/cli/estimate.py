"""The estimate lines of `experiment`, `search` and `plan`: one line on stderr before anything
starts (stdout stays the result, `--json` included, which carries the estimate as a field), and
"about N min left" after each run of an experiment (tuning.experiment.estimate is the model)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tuning.cli.args import printable, say


def say_estimate(estimate: Any) -> dict[str, Any]:
    """Print the estimate's line on stderr; its JSON for the result."""
    say(printable(estimate.line()), file=sys.stderr)
    return dict(estimate.to_json())


def experiment_estimate(path: Path, exp_id: int) -> dict[str, Any]:
    """Print and return the estimate of stored experiment `exp_id` (before its runner starts)."""
    from store import connect
    from tuning.experiment.estimate import experiment_line

    with connect(path, readonly=True) as db:
        return say_estimate(experiment_line(db, exp_id))


def left_line(path: Path, exp_id: int, done: int, total: int) -> str:
    """'run 3 of 6 done; about 2 min left' from the model and the runs finished so far."""
    from store import connect, queries
    from tuning.experiment.estimate import left_text

    with connect(path, readonly=True) as db:
        left = left_text(db, queries.get_experiment(db, exp_id))
    return f"run {done} of {total} done" + (f"; {left}" if left else "")


def search_costs(spec: Any, path: Path) -> Any:
    """The model for a search or plan spec's engine and workload (no DB yet: a guess)."""
    from store import connect
    from tuning.experiment.estimate import costs_from, engine_costs, engine_kind

    engine = spec.engine.to_json() if spec.engine else None
    if not path.exists():
        return costs_from([], [], spec.workload, engine_kind(engine))
    with connect(path, readonly=True) as db:
        return engine_costs(db, engine, spec.workload, base_url=spec.base_url, model=spec.model)
