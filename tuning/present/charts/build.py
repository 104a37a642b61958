"""A comparison's charts from the DB, by kind: what the Compare page, `tuning-lab chart` and
the HTML report draw. Reads only what each chart needs (row samples, series downsampled in SQL)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import altair as alt
import numpy as np

from store import timeseries
from tuning.compare.catalog import WORKLOAD_PARAMS
from tuning.compare.comparison import Comparison, numeric_values
from tuning.present.charts.common import MAX_POINTS, short_labels, side_order, with_context
from tuning.present.charts.compare import (
    cdf_chart,
    cdf_frame,
    knee_chart,
    latency_chart,
    throughput_chart,
)
from tuning.present.charts.kinds import (
    CHART_KINDS,
    DASHBOARD_SERIES,
    LOAD_AXIS,
    SERVER_AXIS,
    memory_series_for,
)
from tuning.present.charts.timeseries import kv_chart, memory_chart

Points = list[tuple[float, float]]


def drawn_series(db: Any, run_ids: Iterable[int]) -> set[str]:
    """Which of the drawn sample series these runs have (probed before a chart is offered)."""
    return timeseries.available_series(db, run_ids, DASHBOARD_SERIES)


def latency_sample(db: Any, run_id: int, max_rows: int = 2000) -> dict[str, np.ndarray]:
    """Per-request TTFT, TPOT, E2EL (ms) of successful requests, thinned to about `max_rows`."""
    rows = timeseries.latency_rows(db, run_id, max_rows)
    if not rows:
        empty = np.zeros(0)
        return {"ttft": empty, "tpot": empty, "e2el": empty}
    arr = np.asarray(rows, dtype=float)
    start, ttft, end, out = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    good = ~np.isnan(ttft) & ~np.isnan(end)
    e2el = (end - start)[good]
    tt = ttft[good]
    long = out[good] > 1
    tpot = (e2el[long] - tt[long]) / (out[good][long] - 1)
    return {"ttft": tt * 1000.0, "tpot": tpot * 1000.0, "e2el": e2el * 1000.0}


def default_align(comparison: Comparison) -> str:
    """Workload parameters reuse one server, so their runs line up at the load's start."""
    return "load" if comparison.param in WORKLOAD_PARAMS else "server"


def run_series(
    db: Any,
    comparison: Comparison,
    series_name: str,
    align: str = "server",
    max_points: int = MAX_POINTS,
) -> dict[tuple[str, str], Points]:
    """Each measured run's samples of one series, keyed (side, 'run N'), downsampled in SQL.
    align='load' shifts each run so its load starts at 0 (summary load_window_s)."""
    short = short_labels(comparison)
    runs = [(side, rid) for side in comparison.sides for rid in side.measured_ids]
    per = max(20, max_points // max(1, len(runs)))
    out: dict[tuple[str, str], Points] = {}
    for side, rid in runs:
        points = timeseries.load_series(db, rid, series_name, max_points=per)
        if not points:
            continue
        if align == "load":
            shift = (comparison.load_windows.get(rid) or (0.0, 0.0))[0] or 0.0
            points = [(t - shift, v) for t, v in points]
        out[(short[side.label], f"run {rid}")] = points
    return out


def cdf_samples(
    db: Any, comparison: Comparison, per_side: int = 4000
) -> dict[str, dict[str, np.ndarray]]:
    """Per side, a row sample of each measured run pooled: the CDF's input."""
    short = short_labels(comparison)
    out: dict[str, dict[str, np.ndarray]] = {}
    for side in comparison.sides:
        if not side.measured_ids:
            continue
        per_run = max(100, per_side // len(side.measured_ids))
        parts = [latency_sample(db, rid, per_run) for rid in side.measured_ids]
        out[short[side.label]] = {
            k: np.concatenate([p[k] for p in parts]) for k in ("ttft", "tpot", "e2el")
        }
    return out


def _time_chart(
    db: Any, comparison: Comparison, kind: str, align: str, memory_series: str | None
) -> alt.TopLevelMixin | None:
    x_title = LOAD_AXIS if align == "load" else SERVER_AXIS
    order = side_order(comparison)
    if kind == "kv":
        series = run_series(db, comparison, "kv_cache_usage_perc", align)
        return kv_chart(series, x_title, order) if series else None
    name = memory_series or memory_series_for(drawn_series(db, comparison.measured_ids))
    if not name:
        return None
    series = run_series(db, comparison, name, align)
    return memory_chart(series, name, x_title, order) if series else None


def build_chart(
    db: Any,
    comparison: Comparison,
    kind: str,
    *,
    error: str = "ci",
    align: str | None = None,
    memory_series: str | None = None,
    context: Sequence[str] = (),
) -> alt.TopLevelMixin | None:
    """One chart of a comparison by kind; None when the runs have no data for it. `context`
    (tuning.compare.context's lines: model, hardware, vLLM, workload) goes under its title."""
    chart = _chart(db, comparison, kind, error, align, memory_series)
    return None if chart is None else with_context(chart, context)


def _chart(
    db: Any,
    comparison: Comparison,
    kind: str,
    error: str,
    align: str | None,
    memory_series: str | None,
) -> alt.TopLevelMixin | None:
    if kind == "throughput":
        return throughput_chart(comparison, error)
    if kind == "latency":
        return latency_chart(comparison, error)
    if kind == "knee":
        return knee_chart(comparison, error=error) if numeric_values(comparison) else None
    if kind == "cdf":
        frame = cdf_frame(cdf_samples(db, comparison))
        return None if frame.empty else cdf_chart(frame, side_order(comparison))
    if kind in ("memory", "kv"):
        return _time_chart(db, comparison, kind, align or default_align(comparison), memory_series)
    raise ValueError(f"unknown chart kind {kind!r}; one of {', '.join(CHART_KINDS)}")
