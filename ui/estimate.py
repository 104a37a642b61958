"""How long a new experiment will take, shown on New experiment before Start
(tuning.experiment.estimate: the same model and line as `python -m tuning experiment` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import streamlit as st

from store import connect
from tuning.engine.spec import EngineSpec
from tuning.experiment.estimate import engine_costs, for_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.measure.traffic.workload import Workload
from ui.common import md_escape

CLOCK = ":material/schedule:"


def render_estimate(
    path: Path,
    engine: EngineSpec | None,
    workload: Mapping[str, Any],
    values: int,
    repeats: int,
    restarts: bool,
    base_url: str | None = None,
    model: str | None = None,
    auto: AutoRepeats | None = None,
) -> None:
    """One caption: expected runs and minutes, and what the numbers rest on; until decided
    (`auto`), the first rounds and the most it may take."""
    if values < 1 or not path.exists():
        return
    try:
        wl = Workload(**workload)
    except ValueError:  # the workload's own error is shown where it is typed
        return
    with connect(path, readonly=True) as db:
        costs = engine_costs(
            db, engine.to_json() if engine else None, wl, base_url=base_url, model=model
        )
    restart = restarts and engine is not None
    if auto is None:
        line = for_experiment(costs, values, repeats, restart).line()
    else:
        line = for_experiment(
            costs,
            values,
            auto.first_rounds,
            restart,
            max_repeats=auto.max_repeats,
            budget_minutes=auto.budget_minutes,
        ).line()
    st.caption(f"{CLOCK} {md_escape(line)}")
