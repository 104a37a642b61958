"""Trade-off views (issue 13, item 6): the Pareto front over the runs of one workload, and metric
vs value for a search or an experiment with the chosen value and the knee marked. The numbers
come from tuning.compare.frontier; the whiskers are the interval the verdicts use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

from store import queries
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import Comparison
from tuning.compare.frontier import (
    AXES,
    AXIS_COLUMNS,
    CLIMB,
    FLAT,
    PARETO_VIEWS,
    axis_value,
    knee_keys,
    side_knee,
)
from tuning.compare.frontier import pareto_front as front_of
from tuning.engine.params import run_value, show_value
from tuning.present.charts.common import chart_text, subtitle_lines, tooltip, whisker_lines
from tuning.present.charts.compare import knee_chart

# The columns tuning.compare.context.run_context reads: what the runs were measured on.
CONTEXT = ("model", "hardware", "vllm_version", "engine", "experiment_id", "workload_json")

TRADEOFF_KINDS = ("pareto", "search")
TRADEOFF_TITLES = {
    "pareto": "Pareto front over the runs of one workload",
    "search": "Metric vs value, with the chosen value and the knee",
}
KNEE_NOTE = (
    f"knee: the last value before a step where throughput grows by under {FLAT:.0%} of the "
    f"load's growth while latency rises by over {CLIMB:.0%}"
)
_FRAME_COLUMNS = ["run", "label", "x", "y", "front", "param", "value"]


def pareto_frame(runs: Sequence[Mapping[str, Any]], view: str = "ttft") -> pd.DataFrame:
    """One row per run with both numbers of the view, `front` True for the non-dominated ones."""
    x_key, y_key = PARETO_VIEWS[view]
    points = [(int(r["id"]), axis_value(r, x_key), axis_value(r, y_key)) for r in runs]
    front = front_of(points, (AXES[x_key].better, AXES[y_key].better))
    by_id = {int(r["id"]): r for r in runs}
    rows = [
        {
            "run": rid,
            "label": chart_text(f"run {rid}: {by_id[rid].get('param')} = {run_value(by_id[rid])}"),
            "x": x,
            "y": y,
            "front": rid in front,
            "param": chart_text(by_id[rid].get("param") or ""),
            "value": chart_text(run_value(by_id[rid]) if by_id[rid].get("value") else ""),
        }
        for rid, x, y in points
        if x is not None and y is not None
    ]
    return pd.DataFrame(rows, columns=_FRAME_COLUMNS)


def tradeoff_runs(db: Any, fingerprint: str) -> list[dict[str, Any]]:
    """The finished runs of one workload (same fingerprint), from the store: the columns
    pareto_frame and an export's context lines (tuning.compare.context) read, not whole runs."""
    return queries.workload_runs(db, fingerprint, ("param", "value", *AXIS_COLUMNS, *CONTEXT))


def pareto_chart(frame: pd.DataFrame, view: str = "ttft", workload: str = "") -> alt.TopLevelMixin:
    """Every run of the workload as a point, the non-dominated ones filled and joined by a step
    line along the front."""
    x_key, y_key = PARETO_VIEWS[view]
    xa, ya = AXES[x_key], AXES[y_key]
    x = alt.X("x:Q", title=f"{xa.label} ({xa.unit}, {xa.better} is better)")
    y = alt.Y("y:Q", title=f"{ya.label} ({ya.unit}, {ya.better} is better)")
    shown = frame.assign(on=frame["front"].map({True: "non-dominated", False: "dominated"}))
    tips = [tooltip("label:N"), tooltip("x:Q", ",.2f"), tooltip("y:Q", ",.2f"), tooltip("on:N")]
    points = (
        alt.Chart(shown)
        .mark_point(size=70, filled=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "on:N",
                title=None,
                scale=alt.Scale(
                    domain=["non-dominated", "dominated"], range=["#1a7f37", "#afb8c1"]
                ),
            ),
            shape=alt.Shape("param:N", title="parameter"),
            tooltip=tips,
        )
    )
    line = (
        alt.Chart(shown[shown["front"]].sort_values("x"))
        .mark_line(color="#1a7f37", strokeDash=[5, 3], interpolate="linear")
        .encode(x=x, y=y, order="x:Q")
    )
    n_front, n = int(frame["front"].sum()), len(frame)
    subtitle = [
        f"{n} runs of workload {chart_text(workload)}; {n_front} non-dominated (no other run "
        "is at least as good on both axes and better on one)",
    ]
    if "tokens_per_user" in (x_key, y_key):
        subtitle.append("tokens/s per user = 1000 / mean TPOT (ms)")
    return alt.layer(line, points).properties(
        width=420,
        height=300,
        title=alt.TitleParams(f"{ya.label} vs {xa.label}: the Pareto front", subtitle=subtitle),
    )


def slo_limits(slo_ms: Mapping[str, float]) -> dict[str, tuple[str, float]]:
    """SLOs (ttft: 1000) as the limit lines of their p99 panels: key -> (label, limit in ms)."""
    return {
        f"p99_{name}_ms": (f"SLO: p99 {name.upper()} <= {limit:g} ms", float(limit))
        for name, limit in slo_ms.items()
        if f"p99_{name}_ms" in METRIC_BY_KEY
    }


def search_chart(
    comparison: Comparison,
    *,
    objective: str = "output_throughput",
    chosen: float | None = None,
    error: str = "ci",
    slo_ms: Mapping[str, float] | None = None,
    columns: int = 2,
) -> alt.ConcatChart:
    """Metric vs value for a search's (or an experiment's) runs: the means with the verdicts'
    interval as whiskers, the chosen value and the knee as labelled vertical rules, each SLO
    (p99 of a latency under its limit) as a horizontal rule on that p99's panel."""
    keys = knee_keys(objective)
    found = side_knee(comparison, ("output_throughput", keys[1]))
    limits = slo_limits(slo_ms or {})
    panels = [*keys, *(k for k in limits if k not in keys)]
    marks: dict[float, list[str]] = {}
    if chosen is not None:
        marks.setdefault(float(chosen), []).append("chosen")
    if found is not None:
        marks.setdefault(found.value, []).append("knee")
    named = {", ".join(names): x for x, names in marks.items()}
    chart = knee_chart(comparison, panels, error, named, limits, columns)
    notes = [*whisker_lines(error), *subtitle_lines(KNEE_NOTE)]
    shown = show_value(comparison.param, found.value) if found else ""
    notes.append(f"knee at {shown}: {found.why}" if found else "no knee in this range")
    if chosen is not None:
        notes.append(f"chosen by the search: {show_value(comparison.param, chosen)}")
    notes += [label for label, _ in limits.values()]
    return chart.properties(
        title=alt.TitleParams(
            f"{chart_text(comparison.param or 'value')}: metric vs value", subtitle=notes
        )
    )
