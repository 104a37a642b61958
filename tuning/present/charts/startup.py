"""The start of each server as a timeline: one bar per run, one segment per phase
(tuning.engine.startup_anatomy) and its total at the end, so a slow start shows where its
seconds went."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from tuning.present.charts.common import chart_text, tooltip


def startup_chart(
    rows: Sequence[dict[str, Any]],
    title: str = "Server start: where the seconds went",
    x_title: str = "seconds since launch",
) -> alt.LayerChart | alt.FacetChart:
    """Rows from `startup_anatomy.phase_rows` (or a run's whole anatomy,
    `run_anatomy.timeline_rows`, with its own titles); x is seconds since launch."""
    frame = pd.DataFrame(
        [{**r, "run": chart_text(r["run"]), "phase": chart_text(r["phase"])} for r in rows]
    )
    runs = list(dict.fromkeys(frame["run"]))
    phases = list(dict.fromkeys(frame.sort_values("order")["phase"]))
    totals = frame.groupby("run", sort=False)["end_s"].max().reset_index()
    totals["total"] = totals["end_s"].map(lambda s: f"{s:.1f} s")
    # the legend beside the bars, one whole name a line (a row under them cut the phases off; a
    # chart fit to its frame keeps the legend inside it); a run's long label is cut at 140 px
    legend = alt.Legend(title=None, orient="right", labelLimit=0)
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("start_s:Q", title=x_title),
            x2="end_s:Q",
            y=alt.Y("run:N", title=None, sort=runs, axis=alt.Axis(labelLimit=140)),
            color=alt.Color("phase:N", sort=phases, legend=legend),
            order=alt.Order("order:Q"),
            tooltip=[
                tooltip("run"),
                tooltip("phase"),
                tooltip("seconds:Q", ".1f"),
                tooltip("start_s:Q", ".1f"),
                tooltip("end_s:Q", ".1f"),
            ],
        )
    )
    total = (  # each start's total at the end of its bar
        alt.Chart(totals)
        .mark_text(align="left", dx=4)
        .encode(
            x="end_s:Q", y=alt.Y("run:N", sort=runs), text="total:N", tooltip=[tooltip("total")]
        )
    )
    return alt.layer(bars, total, title=title).properties(height=alt.Step(28), width="container")
