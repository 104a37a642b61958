"""Compare's server-start rows: each side's mean seconds per phase of the start and its
compile-cache states (tuning.engine.startup_anatomy), with every run's start as a timeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from tuning.compare.comparison import Comparison
from tuning.engine.startup_anatomy import phase_rows, phase_table
from tuning.present.charts.startup import startup_chart


def _anatomy(run: Mapping[str, Any]) -> dict[str, Any] | None:
    anat = (run.get("startup") or {}).get("anatomy")
    return anat if isinstance(anat, dict) and anat.get("phases") else None


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if isinstance(value, float) else str(value)


def render_startup(comparison: Comparison, runs: Sequence[Mapping[str, Any]]) -> None:
    """Nothing for runs stored before the lab split starts into phases (or on a kept server)."""
    by_id = {int(r["id"]): a for r in runs if (a := _anatomy(r))}
    sides = [(s.label, [by_id[i] for i in s.run_ids if i in by_id]) for s in comparison.sides]
    table = phase_table([(label, anats) for label, anats in sides if anats])
    if not table:
        return
    with st.container(key="cmp_startup"):
        st.markdown("#### Server starts")
        st.caption(
            "Seconds from launch to each milestone of the engine's log, on the lab's clock "
            "(means over each side's runs; they add up to time to healthy)."
        )
        cells = pd.DataFrame(table).map(_cell)  # seconds and cache states in one column each
        st.dataframe(cells, hide_index=True, key="cmp_startup_table")
        rows = phase_rows(
            (f"{label} · run {rid}", by_id[rid])
            for s in comparison.sides
            for label, rid in ((s.label, i) for i in s.run_ids)
            if rid in by_id
        )
        st.altair_chart(startup_chart(rows), key="cmp_startup_chart")
