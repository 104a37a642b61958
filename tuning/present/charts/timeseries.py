"""Charts over time: several runs' memory or KV-cache curves on one axis, and the live panel of one
run (memory, KV usage, tokens/s, running and waiting requests) stacked on a shared time axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from core.units import GIB
from tuning.measure import metrics as m
from tuning.present.charts.common import (
    LEGEND_BELOW,
    MAX_POINTS,
    downsample,
    side_color,
    subtitle_lines,
    tooltip,
)
from tuning.present.charts.kinds import MEMORY_SERIES, PREALLOCATION_NOTE, SERVER_AXIS

Series = Mapping[tuple[str, str], Sequence[tuple[float, float]]]


def timeline_frame(
    series: Series, scale: float = 1.0, max_points: int = MAX_POINTS
) -> pd.DataFrame:
    """{(side, run label): [(t_s, value)]} -> long frame, at most `max_points` rows in all."""
    per = max(10, max_points // max(1, len(series)))
    rows = []
    for (side, run), points in series.items():
        for t, v in downsample(points, per):
            rows.append({"side": side, "run": run, "t_s": t, "value": v * scale})
    return pd.DataFrame(rows, columns=["side", "run", "t_s", "value"])


def timeline_chart(
    frame: pd.DataFrame,
    title: str,
    y_title: str,
    subtitle: str = "",
    y_format: str = ",.2f",
    x_title: str = SERVER_AXIS,
    order: Sequence[str] | None = None,
) -> alt.Chart:
    """Several runs' curves overlaid on one run-time axis, coloured by side (one line per run)."""
    order = list(order or dict.fromkeys(frame["side"]))
    return (
        alt.Chart(
            frame,
            width=460,
            height=240,
            title=alt.TitleParams(title, subtitle=subtitle_lines(subtitle)),
        )
        .mark_line(interpolate="step-after", opacity=0.85)
        .encode(
            x=alt.X("t_s:Q", title=x_title),
            y=alt.Y("value:Q", title=y_title),
            color=side_color(order, title="side", legend=LEGEND_BELOW),
            detail=alt.Detail("run:N"),
            tooltip=[
                tooltip("side:N"),
                tooltip("run:N"),
                tooltip("t_s:Q", ".1f"),
                tooltip("value:Q", y_format),
            ],
        )
    )


def memory_chart(
    series: Series,
    series_name: str,
    x_title: str = SERVER_AXIS,
    order: Sequence[str] | None = None,
) -> alt.Chart:
    label = dict(MEMORY_SERIES).get(series_name, series_name)
    frame = timeline_frame(series, 1.0 / GIB)
    return timeline_chart(
        frame, f"Memory: {label}", "GiB", PREALLOCATION_NOTE, x_title=x_title, order=order
    )


def kv_chart(
    series: Series, x_title: str = SERVER_AXIS, order: Sequence[str] | None = None
) -> alt.Chart:
    return timeline_chart(
        timeline_frame(series, 100.0),
        "KV-cache usage",
        "% of KV blocks used",
        "vllm:kv_cache_usage_perc; the capacity is fixed at start",
        ",.1f",
        x_title=x_title,
        order=order,
    )


def counter_rate(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """A cumulative counter's per-second rate between consecutive points (resets clipped to 0)."""
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        if t1 > t0:
            out.append((t1, max(0.0, (v1 - v0) / (t1 - t0))))
    return out


def tokens_rate_from_requests(
    cols: m.Columns, offset_s: float = 0.0, bin_s: float = 1.0
) -> list[tuple[float, float]]:
    """Output tokens/s in `bin_s` bins from stored request rows (chunk times, usage tokens);
    `offset_s` moves request time (since first dispatch) onto the server's time axis."""
    times, weights = m.token_times(cols)
    if times.size == 0:
        return []
    edges = np.arange(0.0, float(times.max()) + bin_s, bin_s)
    if edges.size < 2:
        edges = np.array([0.0, bin_s])
    counts, _ = np.histogram(times, bins=edges, weights=weights)
    return [
        (float(e + offset_s + bin_s), float(c / bin_s))
        for e, c in zip(edges[:-1], counts, strict=True)
    ]


def _panel(
    rows: list[dict[str, Any]],
    title: str,
    y: str,
    fmt: str = ",.2f",
    color: bool = False,
    width: int = 460,
) -> alt.Chart:
    """One strip of the live panel: a step line over the shared time axis."""
    enc: dict[str, Any] = {
        "x": alt.X("t_s:Q", title=SERVER_AXIS),
        "y": alt.Y("value:Q", title=y),
        "tooltip": [tooltip("t_s:Q", ".1f"), tooltip("value:Q", fmt), tooltip("what:N")],
    }
    if color:
        enc["color"] = alt.Color("what:N", title=None, legend=LEGEND_BELOW)
    return (
        alt.Chart(pd.DataFrame(rows, columns=["t_s", "value", "what"]))
        .mark_line(interpolate="step-after")
        .encode(**enc)
        .properties(width=width, height=130, title=title)
    )


def _rows(
    points: Sequence[tuple[float, float]], what: str, scale: float = 1.0
) -> list[dict[str, Any]]:
    return [{"t_s": t, "value": v * scale, "what": what} for t, v in points]


def live_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    memory_series: str,
    tokens_per_s: Sequence[tuple[float, float]] | None = None,
    width: int = 460,
    title: str = "This run, live",
) -> alt.VConcatChart:
    """Memory, KV usage %, output tokens/s and running/waiting of one run, stacked on a shared
    time axis so a climb in one lines up with the others. `series` maps sample series names to
    (t_s, value); tokens/s comes from generation_tokens_total unless given."""
    per = MAX_POINTS // 5

    def thin(name: str) -> list[tuple[float, float]]:
        return downsample(series.get(name) or [], per)

    tps = (
        list(tokens_per_s)
        if tokens_per_s is not None
        else counter_rate(list(series.get("generation_tokens_total") or []))
    )
    queue = [
        row
        for name in ("num_requests_running", "num_requests_waiting")
        for row in _rows(thin(name), name.replace("num_requests_", ""))
    ]
    mem_label = dict(MEMORY_SERIES).get(memory_series, memory_series)
    panels = [
        (_rows(thin(memory_series), "memory", 1.0 / GIB), f"Memory — {mem_label}", "GiB", ",.2f"),
        (_rows(thin("kv_cache_usage_perc"), "KV", 100.0), "KV-cache usage", "%", ",.1f"),
        (_rows(downsample(tps, per), "tokens/s"), "Output tokens/s", "tok/s", ",.0f"),
    ]
    # A panel without data is left out (an empty one with a legend cannot even be rendered).
    charts = [_panel(rows, title, y, fmt, width=width) for rows, title, y, fmt in panels if rows]
    if queue:
        charts.append(
            _panel(queue, "Requests running and waiting", "requests", ",.0f", True, width)
        )
    if not charts:
        charts = [_panel(_rows([(0.0, 0.0)], "none"), "No samples yet", "", width=width)]
    return (
        alt.vconcat(*charts)
        .resolve_scale(x="shared", color="independent")
        .resolve_legend(color="independent")
        .properties(title=alt.TitleParams(title, subtitle=subtitle_lines(PREALLOCATION_NOTE)))
    )
