"""Compare's trade-off views (issue 13, item 6): the Pareto front over the runs of one workload,
and metric vs value with the chosen value (for a search: `?search=ID`) and the knee marked.
Folded away by default and computed only while unfolded (the Pareto front reads every run of the
workload: thousands in a big lab); open with a search link (`?search=ID`). Widget keys start with
`cmp_pareto_` / `cmp_search_`; the expander's open state is `cmp_tradeoffs`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from store import StoreError, queries
from tuning.compare.comparison import Comparison
from tuning.compare.context import run_context
from tuning.decide.search.record import progress
from tuning.present.charts.common import as_float
from tuning.present.charts.tradeoff import (
    KNEE_NOTE,
    TRADEOFF_TITLES,
    pareto_chart,
    pareto_frame,
    search_chart,
    tradeoff_runs,
)
from ui.compare import draw_chart, export_buttons
from ui.compare import parse_id_list as ids_of
from ui.words import metric_words

VIEWS = {
    "ttft": "output throughput vs p99 TTFT",
    "per_user": "tokens/s per user vs output throughput",
}


def render_tradeoffs(
    db: Any,
    path: Path,
    comparison: Comparison,
    scope_id: int | None,
    context: Sequence[str] = (),
) -> None:
    """Both views in tabs inside one expander, drawn only when it is open (opening reruns);
    `context` (the compared runs' model, hardware, vLLM, workload) goes into the metric-vs-value
    chart's files, the Pareto front's own runs' into its."""
    box = st.expander(
        "Trade-offs: Pareto front, metric vs value and the knee",
        expanded=bool(st.query_params.get("search")),
        key="cmp_tradeoffs",
        on_change="rerun",
    )
    if not box.open:
        return
    with box:
        pareto_tab, search_tab = st.tabs([TRADEOFF_TITLES["pareto"], TRADEOFF_TITLES["search"]])
        with pareto_tab:
            _pareto(db, comparison, scope_id)
        with search_tab:
            _metric_vs_value(db, path, comparison, scope_id, context)


def _pareto(db: Any, comparison: Comparison, scope_id: int | None) -> None:
    counts = dict(queries.workload_fingerprints(db))
    if not counts:
        st.caption("No finished runs with a workload fingerprint yet.")
        return
    first = queries.load_runs(db, comparison.baseline.run_ids[:1])
    mine = first[0].get("workload_fingerprint") if first else None
    options = list(counts)
    c1, c2 = st.columns(2)
    fingerprint = c1.selectbox(
        "Workload (fingerprint)",
        options,
        index=options.index(mine) if mine in counts else 0,
        key="cmp_pareto_fp",
        format_func=lambda fp: (
            f"{fp} ({counts[fp]} runs)" + (" · these runs' workload" if fp == mine else "")
        ),
    )
    view = c2.radio(
        "Axes", list(VIEWS), key="cmp_pareto_view", format_func=VIEWS.__getitem__, horizontal=True
    )
    runs = tradeoff_runs(db, fingerprint)
    frame = pareto_frame(runs, view)
    if frame.empty:
        st.caption("These runs lack the numbers for this view.")
        return
    chart: Any = pareto_chart(frame, view, fingerprint)
    draw_chart(chart, "chart_pareto")
    export_buttons(chart, "pareto", scope_id, run_context(runs).lines())
    front = frame[frame["front"]].sort_values("x")
    st.dataframe(
        pd.DataFrame({"run": front["run"], "configuration": front["label"]}),
        hide_index=True,
        key="cmp_pareto_front",
    )


def _metric_vs_value(
    db: Any, path: Path, comparison: Comparison, scope_id: int | None, context: Sequence[str]
) -> None:
    if not any(as_float(side.value) is not None for side in comparison.sides):
        st.caption("The value is not a number: no curve to draw.")
        return
    objective, chosen, slo = "output_throughput", None, None
    search_ids = ids_of(st.query_params.get("search"))
    if search_ids:
        try:
            done = progress(path, queries.get_search(db, search_ids[0]))
        except StoreError:
            st.caption(f"No search {search_ids[0]} in this lab.")
        else:
            objective, chosen, slo = done.spec.metric, done.chosen, done.spec.slo_ms
            st.caption(
                f"Search {search_ids[0]}: objective {metric_words(objective)}, chosen value marked."
            )
    chart = search_chart(comparison, objective=objective, chosen=chosen, slo_ms=slo)
    draw_chart(chart, "chart_search")
    st.caption(KNEE_NOTE)
    export_buttons(chart, "search", scope_id, context)
