"""The estimate lines of `experiment`, `search` and `plan`: one line on stderr before anything
starts (stdout stays the result, `--json` included, which carries the estimate as a field),
"about N min left" after each run of an experiment (tuning.experiment.estimate is the model), and
once the first runs are in, whether longer loads would decide sooner than more restarts
(tuning.experiment.load_length)."""

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


def load_advice(path: Path, exp_id: int) -> Any:
    """The load length advice (tuning.experiment.load_length) for experiment `exp_id` from its
    finished runs: their start and rest, load, spread and noise within each run; None until
    some value has two measured runs (or nothing was measured)."""
    import math

    from store import connect, queries, timings
    from tuning.engine.params import format_value
    from tuning.experiment.estimate import blend, costs_of, restarts, with_switches
    from tuning.experiment.load_length import (
        advise,
        observed_effect,
        pooled_cv,
        within_run_cv,
    )

    with connect(path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = [r for r in queries.list_runs(db, exp_id) if r.get("status") == "done"]
        by_value: dict[str, list[float]] = {}
        inside: list[float] = []
        for run in runs:
            tput = run.get("output_throughput")
            if isinstance(tput, (int, float)) and math.isfinite(tput):
                by_value.setdefault(str(run.get("value")), []).append(float(tput))
            cv = within_run_cv(queries.request_rows(db, int(run["id"])))
            if cv is not None:
                inside.append(cv)
        if not exp.get("workload") or not runs:
            return None
        costs = blend(costs_of(db, exp), timings.experiment_run_timings(db, exp_id))
        costs = with_switches(db, exp, costs)  # repeats that switch resident servers
        restart = restarts(exp)
    labels = [format_value(v) for v in exp.get("values") or []]  # the baseline first
    sides = [by_value.get(label, []) for label in labels if label in by_value]
    spread = pooled_cv(sides)
    requests = int((exp["workload"] or {}).get("num_requests") or 0)
    if spread is None or not inside or requests < 1 or costs.load_s <= 0:
        return None
    return advise(
        start_s=costs.run_s(restart) - costs.load_s,  # a run's start (or switch) and rest
        load_s=costs.load_s,
        requests=requests,
        spread=spread,
        within=math.sqrt(sum(c * c for c in inside) / len(inside)),
        effect=observed_effect(sides),
    )


def say_load_advice(path: Path, exp_id: int) -> dict[str, Any] | None:
    """Print the load length advice of experiment `exp_id` on stderr when there is one; its JSON."""
    advice = load_advice(path, exp_id)
    if advice is None:
        return None
    say(printable(advice.line()), file=sys.stderr)
    return dict(advice.to_json())
