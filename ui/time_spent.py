"""Where an experiment's time went, for Live and Compare: one line per experiment ("9.0 min: 4.6
starting, 2.0 load, 0.4 other"), its estimate against what it took, its cold starts, and each
run's parts as a timeline (tuning.experiment.run_anatomy, tuning.experiment.time_spent)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from tuning.experiment.run_anatomy import describe, timeline_rows
from tuning.experiment.time_spent import report
from tuning.present.charts.startup import startup_chart
from ui.common import md_escape as esc

TITLE = "Where each run's time went"
X_TITLE = "seconds since the previous run's end"


def _anatomy_label(run: Mapping[str, Any]) -> str:
    return f"run {run['id']}: {run.get('value')}"


def render_time_spent(db: Any, runs: Sequence[Mapping[str, Any]], key: str) -> None:
    """The lines of each experiment `runs` belong to; nothing for runs stored without anatomy."""
    spent = report(db, runs)
    if not spent:
        return
    with st.container(key=key):
        for entry in spent:
            st.caption("  \n".join(esc(line) for line in entry["lines"]))


def render_timeline(runs: Sequence[Mapping[str, Any]], key: str) -> None:
    """Each run's parts, one bar a run; the run in flight shows its parts so far."""
    rows = timeline_rows((_anatomy_label(r), r.get("anatomy")) for r in runs)
    if not rows:
        return
    st.altair_chart(startup_chart(rows, TITLE, X_TITLE), key=key)
    current = next((r for r in reversed(runs) if r.get("anatomy")), None)
    if current is not None:
        st.caption(f"{_anatomy_label(current)}, {esc(describe(current.get('anatomy')))}")
