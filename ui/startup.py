"""Compare's server-start rows: each side's mean seconds per phase of the start, their total and
its compile-cache states in words (tuning.engine.startup_anatomy), with every run's start as a
timeline whose rows name the run first (a long value is cut after it, not before)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from tuning.compare.comparison import Comparison
from tuning.compare.present import side_heading
from tuning.engine.startup_anatomy import phase_rows, phase_table
from tuning.present.charts.startup import startup_chart

CACHE = "compile cache"
TOTAL = "total: launch to healthy"
# What each compile-cache state of a start means, in a few words for the table's cells.
CACHE_WORDS = {
    "hit": "hit (loaded from the cache)",
    "miss": "miss (compiled, then cached)",
    "partial": "partial (some loaded, some compiled)",
    "disabled": "off (the cache was disabled)",
    "eager": "none (eager mode: nothing compiled)",
    "?": "not known",
}
CACHE_HELP = (
    "Compile cache: torch.compile's work is kept in vLLM's cache. A miss compiled the model "
    "(a configuration's first start, slower); a hit loaded it from the cache (a later start "
    "of the same configuration, faster)."
)


def _anatomy(run: Mapping[str, Any]) -> dict[str, Any] | None:
    anat = (run.get("startup") or {}).get("anatomy")
    return anat if isinstance(anat, dict) and anat.get("phases") else None


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if isinstance(value, float) else str(value)


def cache_words(states: Any) -> Any:
    """A side's compile-cache cell ("miss hit": one state per run) in words."""
    if not isinstance(states, str):
        return states
    return " · ".join(CACHE_WORDS.get(s, s) for s in states.split())


def with_total(table: list[dict[str, Any]], sides: Sequence[str]) -> list[dict[str, Any]]:
    """The phase table with its total row (each side's phases summed: launch to healthy) before
    the compile-cache row, and that row's states in words."""
    phases = [r for r in table if r["phase"] != CACHE]
    total: dict[str, Any] = {"phase": TOTAL}
    for side in sides:
        secs = [r[side] for r in phases if isinstance(r.get(side), (int, float))]
        total[side] = round(sum(secs), 1) if secs else None
    caches = [{**r, **{s: cache_words(r.get(s)) for s in sides}} for r in table if r not in phases]
    return [*phases, total, *caches]


def render_startup(comparison: Comparison, runs: Sequence[Mapping[str, Any]]) -> None:
    """Nothing for runs stored before the lab split starts into phases (or on a kept server)."""
    by_id = {int(r["id"]): a for r in runs if (a := _anatomy(r))}
    heads = {
        s.label: side_heading(comparison, s) + (" (baseline)" if i == 0 else "")
        for i, s in enumerate(comparison.sides)
    }
    sides = [
        (heads[s.label], [by_id[i] for i in s.run_ids if i in by_id]) for s in comparison.sides
    ]
    shown = [label for label, anats in sides if anats]
    table = phase_table([(label, anats) for label, anats in sides if anats])
    if not table:
        return
    with st.container(key="cmp_startup"):
        st.markdown("#### Server starts")
        st.caption(
            "Seconds from launch to each milestone of the engine's log, on the lab's clock "
            "(means over each side's runs; they add up to the total, launch to healthy)."
        )
        cells = pd.DataFrame(with_total(table, shown)).map(_cell)  # seconds and states
        st.dataframe(cells, hide_index=True, key="cmp_startup_table")
        st.caption(CACHE_HELP)
        rows = phase_rows(
            (f"run {rid} · {heads[s.label]}", by_id[rid])
            for s in comparison.sides
            for rid in s.run_ids
            if rid in by_id
        )
        st.altair_chart(startup_chart(rows), key="cmp_startup_chart")
