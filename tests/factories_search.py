"""A small finished search stored the way `tuning-lab search` stores one, for the docs' real
outputs and the pages: the search's own strategy (tuning.decide.search.driver.next_action) picks
each step and says why, each step is an experiment named as the driver names it, with one seeded
run (tests.factories.add_run: no server; a repeat has one failed request more than the one
before it, so repeats differ), and the row is written by `recorded` with the result
`result_of` builds from the stored steps. Deterministic: the same lab every time."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from store import connect
from tests.factories import LOAD, WORKLOAD, add_experiment, add_run
from tuning.decide.search.driver import (
    NAME_PREFIX,
    SearchSpec,
    next_action,
    observations,
    result_of,
)
from tuning.decide.search.record import recorded
from tuning.decide.search.strategy import Space
from tuning.engine.params import format_value
from tuning.measure.traffic.workload import Workload


def add_search(
    db_path: Path,
    *,
    param: str = "max-num-seqs",
    lo: int = 2,
    hi: int = 32,
    budget_runs: int = 6,
    coarse: int = 3,
    slo_ms: dict[str, float] | None = None,
    seed: int = 11,
) -> dict[str, Any]:
    """A finished search of `param` over lo..hi (output throughput, `budget_runs` runs): its
    result as `tuning-lab search --json` prints it (with its `search_id`)."""
    spec = SearchSpec(
        param=param,
        space=Space(float(lo), float(hi), True),
        objective="output_throughput",
        workload=Workload.from_dict(WORKLOAD),
        engine=None,
        slo_ms=dict(slo_ms or {}),
        budget_runs=budget_runs,
        coarse=coarse,
    )
    rng = np.random.default_rng(seed)
    kept: dict[str, Any] = {}
    with recorded(db_path, spec) as keep:
        while True:
            stored = observations(db_path, spec)
            step, _ = next_action(spec, stored)
            if step.value is None:
                break
            value = int(step.value)
            repeat = sum(1 for e in stored.log if int(e["value"]) == value)
            with connect(db_path) as db:
                exp = add_experiment(
                    db,
                    values=[value],
                    param=param,
                    name=f"{NAME_PREFIX}{spec.key()}: {param} = {format_value(value)}",
                    notes=step.why,
                    workload_json=WORKLOAD,
                )
                # a value's second run has one failed request more than its first: they differ
                load = replace(LOAD, failed_requests=tuple(range(5, 6 + repeat % 2)))
                add_run(db, exp, seq=0, value=value, rng=rng, repeat=repeat, param=param, load=load)
        kept = result_of(db_path, spec, step.why)
        keep(kept)
    return kept
