"""How long a new experiment will take, shown on New experiment before Start
(tuning.experiment.estimate: the same model and line as `tuning-lab experiment` prints)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from store import connect
from tuning.experiment.estimate import engine_costs, for_experiment, with_switches
from tuning.experiment.spec import ExperimentSpec
from tuning.experiment.switch_cost import spec_experiment
from ui.common import md_escape

CLOCK = ":material/schedule:"


def render_estimate(path: Path, spec: ExperimentSpec) -> None:
    """One caption: expected runs and minutes, and what the numbers rest on; until decided, the
    first rounds and the most it may take."""
    if not spec.values or not path.exists():
        return
    engine = spec.engine.to_json() if spec.engine else None
    with connect(path, readonly=True) as db:
        costs = engine_costs(db, engine, spec.workload, base_url=spec.base_url, model=spec.model)
        costs = with_switches(db, spec_experiment(spec), costs)  # repeats that switch servers
    auto = spec.auto
    line = for_experiment(
        costs,
        len(spec.values),
        spec.first_rounds,
        spec.restarts,
        max_repeats=auto.max_repeats if auto else None,
        budget_minutes=auto.budget_minutes if auto else None,
    ).line()
    st.caption(f"{CLOCK} {md_escape(line)}")
