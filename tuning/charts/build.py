"""Altair charts of comparisons and runs; no Streamlit, so the CLI exports the same pictures.

Every chart gets small data: side means rather than runs, CDFs at fixed quantiles rather than
every request, and time series downsampled to at most `MAX_POINTS` points per chart, so a chart
of 20 runs stays a few hundred kilobytes in the browser and in an exported HTML file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from store import queries
from tuning import metrics as m
from tuning.compare.comparison import (
    METRIC_BY_KEY,
    WORKLOAD_PARAMS,
    Comparison,
    Side,
    available_series,
    latency_sample,
    numeric_values,
)

MAX_POINTS = 2000
CDF_POINTS = 101
LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATS = (("mean", "mean"), ("median", "p50"), ("p99", "p99"))
GIB = float(2**30)
PREALLOCATION_NOTE = (
    "vLLM pre-allocates the KV cache at start, so used memory barely moves "
    "under load while KV usage climbs."
)
MEMORY_SERIES: tuple[tuple[str, str], ...] = (
    ("gpu_tree_bytes", "GPU memory of the server's processes"),
    ("gpu_used_bytes", "GPU memory used (whole device)"),
    ("tree_rss_bytes", "RSS of the server's process tree"),
)


def _tt(field: str, fmt: str | None = None) -> alt.Tooltip:
    """Channel objects, never shorthand strings: Altair turns each string into a schema lookup
    that costs ~10 ms, which a page of six charts would feel."""
    return alt.Tooltip(field, format=fmt) if fmt else alt.Tooltip(field)


def _sides_order(comparison: Comparison) -> list[str]:
    return list(short_labels(comparison).values())


def short_labels(comparison: Comparison) -> dict[str, str]:
    """Side label -> what an axis shows: the value alone ('16', '2 (baseline)') when those are
    unique, else the full 'param = value' labels."""
    out = {}
    for side in comparison.sides:
        short = side.value if side.value is not None and side.param == comparison.param else None
        if short is not None and side is comparison.baseline:
            short = f"{short} (baseline)"
        out[side.label] = short or side.label
    if len(set(out.values())) != len(out):
        return {s.label: s.label for s in comparison.sides}
    return out


def downsample(
    points: Sequence[tuple[float, float]], max_points: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """At most `max_points` (t, v): the max of equal-count buckets, so peaks stay visible."""
    if len(points) <= max_points:
        return list(points)
    arr = np.asarray(points, dtype=float)
    edges = np.linspace(0, arr.shape[0], max_points + 1).astype(int)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b > a:
            chunk = arr[a:b]
            out.append((float(chunk[-1, 0]), float(chunk[:, 1].max())))
    return out


# --------------------------------------------------------------------------------------------
# Bars with error bars
# --------------------------------------------------------------------------------------------


def side_frame(comparison: Comparison, keys: Iterable[str], error: str = "ci") -> pd.DataFrame:
    """One row per (side, metric): mean and the error bar ends (bootstrap CI of the mean, or the
    runs' min-max with error='minmax'); one run gives no bar."""
    rows = []
    short = short_labels(comparison)
    for side in comparison.sides:
        for key in keys:
            st = side.stats(key)
            if st["mean"] is None:
                continue
            lo, hi = st["min"], st["max"]
            if error == "ci":
                ci = side.mean_ci(key, comparison.confidence)
                lo, hi = ci if ci else (st["mean"], st["mean"])
            metric = METRIC_BY_KEY[key]
            rows.append(
                {
                    "side": short[side.label],
                    "metric": key,
                    "label": metric.label,
                    "unit": metric.unit,
                    "mean": st["mean"],
                    "low": lo,
                    "high": hi,
                    "runs": st["n"],
                }
            )
    return pd.DataFrame(
        rows, columns=["side", "metric", "label", "unit", "mean", "low", "high", "runs"]
    )


def _run_points(comparison: Comparison, keys: Iterable[str]) -> pd.DataFrame:
    rows = []
    short = short_labels(comparison)
    for side in comparison.sides:
        for key in keys:
            for rid, v in (side.per_run.get(key) or {}).items():
                if v is not None:
                    rows.append({"side": short[side.label], "metric": key, "run": rid, "value": v})
    return pd.DataFrame(rows, columns=["side", "metric", "run", "value"])


def bar_chart(
    comparison: Comparison, key: str, error: str = "ci", title: str | None = None
) -> alt.LayerChart:
    """Mean per side with its error bar and every run as a dot: the spread is part of the answer."""
    metric = METRIC_BY_KEY[key]
    frame = side_frame(comparison, [key], error)
    dots = _run_points(comparison, [key])
    order = _sides_order(comparison)
    y_title = f"{metric.label} ({metric.unit})"
    x = alt.X("side:N", sort=order, title=comparison.param or "side", axis=alt.Axis(labelAngle=0))
    color = alt.Color("side:N", sort=order, legend=None)
    bars = (
        alt.Chart(frame)
        .mark_bar(opacity=0.8)
        .encode(
            x=x,
            y=alt.Y("mean:Q", title=y_title),
            color=color,
            tooltip=[
                _tt("side:N"),
                _tt("mean:Q", ",.2f"),
                _tt("low:Q", ",.2f"),
                _tt("high:Q", ",.2f"),
                _tt("runs:Q"),
            ],
        )
    )
    rules = (
        alt.Chart(frame)
        .mark_errorbar(ticks=True)
        .encode(x=x, y=alt.Y("low:Q", title=y_title), y2=alt.Y2("high"))
    )
    points = (
        alt.Chart(dots)
        .mark_circle(size=30, color="black", opacity=0.6)
        .encode(x=x, y=alt.Y("value:Q"), tooltip=[_tt("run:N"), _tt("value:Q", ",.2f")])
    )
    what = "95 % CI of the mean" if error == "ci" else "min–max of the runs"
    return alt.layer(bars, rules, points).properties(
        width=max(160, 70 * len(order)),
        height=260,
        title=alt.TitleParams(
            title or metric.label, subtitle=f"bars: mean; whiskers: {what}; dots: runs"
        ),
    )


def throughput_chart(comparison: Comparison, error: str = "ci") -> alt.LayerChart:
    return bar_chart(comparison, "output_throughput", error, "Output throughput (tok/s)")


def latency_chart(
    comparison: Comparison, error: str = "ci", latencies: Sequence[str] = LATENCIES
) -> alt.FacetChart:
    """Mean, p50 and p99 of each latency, side by side per value, one panel per latency."""
    keys = [f"{stat}_{lat}_ms" for lat in latencies for stat, _ in STATS]
    keys = [k for k in keys if k in METRIC_BY_KEY]
    frame = side_frame(comparison, keys, error)
    stat_label = dict(STATS)
    frame["latency"] = frame["metric"].str.split("_").str[1].str.upper()
    frame["stat"] = frame["metric"].str.split("_").str[0].map(stat_label)
    order = _sides_order(comparison)
    base = alt.Chart().encode(
        x=alt.X("stat:N", sort=[s for _, s in STATS], title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("side:N", sort=order),
        color=alt.Color("side:N", sort=order, title=comparison.param or "side"),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("mean:Q", title="ms"),
        tooltip=[
            _tt("side:N"),
            _tt("latency:N"),
            _tt("stat:N"),
            _tt("mean:Q", ",.2f"),
            _tt("low:Q", ",.2f"),
            _tt("high:Q", ",.2f"),
            _tt("runs:Q"),
        ],
    )
    rules = base.mark_rule().encode(
        y=alt.Y("low:Q"), y2=alt.Y2("high"), color=alt.ColorValue("black")
    )
    return (
        alt.layer(bars, rules, data=frame)
        .properties(width=180, height=220)
        .facet(column=alt.Column("latency:N", sort=[x.upper() for x in latencies], title=None))
        .resolve_scale(y="independent")
        .properties(
            title=alt.TitleParams(
                "Latency per value (ms)",
                subtitle="TTFT, TPOT = (E2EL − TTFT)/(output tokens − 1), ITL, "
                "E2EL; whiskers: 95 % CI of the mean over runs",
            )
        )
    )


# --------------------------------------------------------------------------------------------
# CDFs
# --------------------------------------------------------------------------------------------


def cdf_frame(
    samples: Mapping[str, Mapping[str, np.ndarray]], points: int = CDF_POINTS
) -> pd.DataFrame:
    """{side: {metric: values_ms}} -> the empirical CDF at `points` fixed quantiles per line,
    pooled over the side's runs (the per-request shape, not a verdict)."""
    qs = np.linspace(0.0, 1.0, points)
    rows = []
    for side, by_metric in samples.items():
        for metric, values in by_metric.items():
            vals = np.asarray(values, dtype=float)
            vals = vals[np.isfinite(vals)]
            if vals.size == 0:
                continue
            for q, v in zip(qs, np.quantile(vals, qs)):
                rows.append(
                    {
                        "side": side,
                        "metric": metric.upper(),
                        "value_ms": float(v),
                        "quantile": float(q),
                    }
                )
    return pd.DataFrame(rows, columns=["side", "metric", "value_ms", "quantile"])


def cdf_chart(frame: pd.DataFrame, order: Sequence[str] | None = None) -> alt.FacetChart:
    """Latency CDFs overlaid per side, one panel per metric (independent x)."""
    order = list(order or dict.fromkeys(frame["side"]))
    metrics_order = [x for x in ("TTFT", "TPOT", "ITL", "E2EL") if x in set(frame["metric"])]
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("value_ms:Q", title="ms"),
            y=alt.Y("quantile:Q", title="share of requests ≤ x", axis=alt.Axis(format="%")),
            color=alt.Color("side:N", sort=order, title="side"),
            tooltip=[
                _tt("side:N"),
                _tt("metric:N"),
                _tt("value_ms:Q", ",.2f"),
                _tt("quantile:Q", ".0%"),
            ],
        )
        .properties(width=220, height=200)
        .facet(column=alt.Column("metric:N", sort=metrics_order, title=None))
        .resolve_scale(x="independent")
        .properties(
            title=alt.TitleParams(
                "Latency CDF per request", subtitle="pooled over each side's runs (sampled rows)"
            )
        )
    )


# --------------------------------------------------------------------------------------------
# Time series
# --------------------------------------------------------------------------------------------


def timeline_frame(
    series: Mapping[tuple[str, str], Sequence[tuple[float, float]]],
    scale: float = 1.0,
    max_points: int = MAX_POINTS,
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
    x_title: str = "run time (s since server start)",
    order: Sequence[str] | None = None,
) -> alt.Chart:
    """Several runs' curves overlaid on one run-time axis, coloured by side (one line per run)."""
    order = list(order or dict.fromkeys(frame["side"]))
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after", opacity=0.85)
        .encode(
            x=alt.X("t_s:Q", title=x_title),
            y=alt.Y("value:Q", title=y_title),
            color=alt.Color("side:N", sort=order, title="side"),
            detail=alt.Detail("run:N"),
            tooltip=[_tt("side:N"), _tt("run:N"), _tt("t_s:Q", ".1f"), _tt("value:Q", y_format)],
        )
        .properties(width=640, height=240, title=alt.TitleParams(title, subtitle=subtitle))
    )


def memory_chart(
    series: Mapping[tuple[str, str], Sequence[tuple[float, float]]],
    series_name: str,
    x_title: str = "run time (s since server start)",
    order: Sequence[str] | None = None,
) -> alt.Chart:
    label = dict(MEMORY_SERIES).get(series_name, series_name)
    return timeline_chart(
        timeline_frame(series, 1.0 / GIB),
        f"Memory: {label}",
        "GiB",
        PREALLOCATION_NOTE,
        x_title=x_title,
        order=order,
    )


def kv_chart(
    series: Mapping[tuple[str, str], Sequence[tuple[float, float]]],
    x_title: str = "run time (s since server start)",
    order: Sequence[str] | None = None,
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


# --------------------------------------------------------------------------------------------
# Knee: metric vs parameter value
# --------------------------------------------------------------------------------------------


def knee_chart(
    comparison: Comparison,
    keys: Sequence[str] = ("output_throughput", "p99_ttft_ms"),
    error: str = "ci",
) -> alt.HConcatChart:
    """For a numeric parameter: each metric's mean vs the value (line + points + error bars),
    where the curve flattens or turns is the knee."""
    charts = []
    for key in keys:
        if key not in METRIC_BY_KEY:
            continue
        frame = side_frame(comparison, [key], error)
        if frame.empty:
            continue
        short = short_labels(comparison)
        values = {short[s.label]: s.value for s in comparison.sides}
        frame["x"] = frame["side"].map(lambda s: _number(values.get(s)))
        frame = frame.dropna(subset=["x"])
        metric = METRIC_BY_KEY[key]
        x = alt.X("x:Q", title=comparison.param or "value", scale=alt.Scale(zero=False))
        y_title = f"{metric.label} ({metric.unit})"
        line = (
            alt.Chart(frame)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("mean:Q", title=y_title),
                tooltip=[_tt("side:N"), _tt("mean:Q", ",.2f"), _tt("runs:Q")],
            )
        )
        bars = (
            alt.Chart(frame)
            .mark_errorbar(ticks=True)
            .encode(x=x, y=alt.Y("low:Q", title=y_title), y2=alt.Y2("high"))
        )
        charts.append(
            alt.layer(line, bars).properties(
                width=300, height=220, title=f"{metric.label} vs value"
            )
        )
    if not charts:
        charts.append(alt.Chart(pd.DataFrame({"x": []})).mark_point())
    return alt.hconcat(*charts).properties(
        title=alt.TitleParams(
            f"Where it bends: metric vs {comparison.param or 'value'}",
            subtitle="mean over runs; whiskers: 95 % CI of the mean",
        )
    )


# --------------------------------------------------------------------------------------------
# Live: one run, one time axis
# --------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def counter_rate(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """A cumulative counter's per-second rate between consecutive points (resets clipped to 0)."""
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
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
    return [(float(e + offset_s + bin_s), float(c / bin_s)) for e, c in zip(edges[:-1], counts)]


def live_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    memory_series: str,
    tokens_per_s: Sequence[tuple[float, float]] | None = None,
    width: int = 680,
) -> alt.VConcatChart:
    """Memory, KV usage %, output tokens/s and running/waiting of one run, stacked on a shared
    time axis so a climb in one lines up with the others. `series` maps sample series names to
    (t_s, value); tokens/s comes from generation_tokens_total unless given."""
    per = MAX_POINTS // 5
    mem = downsample(series.get(memory_series) or [], per)
    kv = downsample(series.get("kv_cache_usage_perc") or [], per)
    tps = (
        list(tokens_per_s)
        if tokens_per_s is not None
        else counter_rate(list(series.get("generation_tokens_total") or []))
    )
    tps = downsample(tps, per)
    queue = [
        {"t_s": t, "value": v, "what": name.replace("num_requests_", "")}
        for name in ("num_requests_running", "num_requests_waiting")
        for t, v in downsample(series.get(name) or [], per)
    ]
    x = alt.X("t_s:Q", title="run time (s since server start)")
    mem_label = dict(MEMORY_SERIES).get(memory_series, memory_series)

    def panel(
        rows: list[dict[str, Any]], title: str, y: str, color: str | None = None, fmt: str = ",.2f"
    ) -> alt.Chart:
        frame = pd.DataFrame(rows, columns=["t_s", "value", "what"])
        enc: dict[str, Any] = {
            "x": x,
            "y": alt.Y("value:Q", title=y),
            "tooltip": [_tt("t_s:Q", ".1f"), _tt("value:Q", fmt), _tt("what:N")],
        }
        if color:
            enc["color"] = alt.Color("what:N", title=None)
        return (
            alt.Chart(frame)
            .mark_line(interpolate="step-after")
            .encode(**enc)
            .properties(width=width, height=130, title=title)
        )

    panels = [
        (
            [{"t_s": t, "value": v / GIB, "what": "memory"} for t, v in mem],
            f"Memory — {mem_label}",
            "GiB",
            None,
            ",.2f",
        ),
        (
            [{"t_s": t, "value": v * 100.0, "what": "KV"} for t, v in kv],
            "KV-cache usage",
            "%",
            None,
            ",.1f",
        ),
        (
            [{"t_s": t, "value": v, "what": "tokens/s"} for t, v in tps],
            "Output tokens/s",
            "tok/s",
            None,
            ",.0f",
        ),
        (queue, "Requests running and waiting", "requests", "what", ",.0f"),
    ]
    # A panel without data is left out (an empty one with a legend cannot even be rendered).
    charts = [panel(rows, title, y, color, fmt) for rows, title, y, color, fmt in panels if rows]
    if not charts:
        charts = [panel([{"t_s": 0.0, "value": 0.0, "what": "none"}], "No samples yet", "")]
    return (
        alt.vconcat(*charts)
        .resolve_scale(x="shared", color="independent")
        .resolve_legend(color="independent")
        .properties(title=alt.TitleParams("This run, live", subtitle=PREALLOCATION_NOTE))
    )


def memory_series_for(available: Iterable[str]) -> str | None:
    """The most telling memory series a run has: the server's GPU memory, else host RSS."""
    have = set(available)
    return next((name for name, _ in MEMORY_SERIES if name in have), None)


def side_of_runs(comparison: Comparison) -> dict[int, Side]:
    return {rid: side for side in comparison.sides for rid in side.run_ids}


# --------------------------------------------------------------------------------------------
# From the DB: what the Compare page and `python -m tuning chart` draw
# --------------------------------------------------------------------------------------------

CHART_KINDS = ("throughput", "latency", "cdf", "memory", "kv", "knee")
CHART_TITLES = {
    "throughput": "Output throughput per value",
    "latency": "Latency percentiles per value",
    "knee": "Metric vs parameter value",
    "cdf": "Latency distributions (CDF)",
    "memory": "Memory over run time",
    "kv": "KV-cache usage over run time",
}


def default_align(comparison: Comparison) -> str:
    """Workload parameters reuse one server, so their runs line up at the load's start."""
    return "load" if comparison.param in WORKLOAD_PARAMS else "server"


def run_series(
    db: Any,
    comparison: Comparison,
    series_name: str,
    align: str = "server",
    max_points: int = MAX_POINTS,
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each measured run's samples of one series, keyed (side, 'run N'), downsampled in SQL.
    align='load' shifts each run so its load starts at 0 (summary load_window_s)."""
    short = short_labels(comparison)
    runs = [(side, rid) for side in comparison.sides for rid in side.measured_ids]
    per = max(20, max_points // max(1, len(runs)))
    windows = comparison.load_windows
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for side, rid in runs:
        points = queries.load_series(db, rid, series_name, max_points=per)
        if not points:
            continue
        if align == "load":
            shift = (windows.get(rid) or (0.0, 0.0))[0] or 0.0
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


def build_chart(
    db: Any,
    comparison: Comparison,
    kind: str,
    *,
    error: str = "ci",
    align: str | None = None,
    memory_series: str | None = None,
) -> alt.TopLevelMixin | None:
    """One chart of a comparison by kind; None when the runs have no data for it."""
    order = _sides_order(comparison)
    if kind == "throughput":
        return throughput_chart(comparison, error)
    if kind == "latency":
        return latency_chart(comparison, error)
    if kind == "knee":
        return knee_chart(comparison, error=error) if numeric_values(comparison) else None
    if kind == "cdf":
        frame = cdf_frame(cdf_samples(db, comparison))
        return None if frame.empty else cdf_chart(frame, order)
    if kind in ("memory", "kv"):
        align = align or default_align(comparison)
        x_title = (
            "s since the load started" if align == "load" else "run time (s since server start)"
        )
        ids = [rid for s in comparison.sides for rid in s.measured_ids]
        if kind == "memory":
            name = memory_series or memory_series_for(available_series(db, ids))
            if not name:
                return None
            series = run_series(db, comparison, name, align)
            return memory_chart(series, name, x_title, order) if series else None
        series = run_series(db, comparison, "kv_cache_usage_perc", align)
        return kv_chart(series, x_title, order) if series else None
    raise ValueError(f"unknown chart kind {kind!r}; one of {', '.join(CHART_KINDS)}")
