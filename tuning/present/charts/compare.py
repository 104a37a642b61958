"""Charts of a comparison's sides: bars with error bars and run dots, latency percentiles, the
knee (metric vs a numeric value) and the per-request latency CDFs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from tuning.compare.catalog import LATENCIES, METRIC_BY_KEY, STATS
from tuning.compare.comparison import Comparison
from tuning.present.charts.common import (
    CAP_PX,
    FROM_ZERO,
    LEGEND_BELOW,
    as_float,
    band_axis,
    chart_text,
    param_axis,
    run_points,
    short_labels,
    side_color,
    side_frame,
    side_order,
    tooltip,
    whisker_lines,
    y_title,
)

CDF_POINTS = 101
# A knee panel two a row: with their y axes (5-digit labels and a title) and the gap between
# them, two of 170 px take about 510 of the 532 px the Compare page's charts get in a 1024 px
# window with the sidebar open (two of 200 px drew 590: the second panel was cut).
KNEE_PANEL_PX = 170
# A latency panel, two a row: 190 px drew 558 of those 532 px, the E2EL panel's right edge cut.
LATENCY_PANEL_PX = 175
WHISKER = "#31333f"  # Streamlit's text colour
_MEAN_TIPS = (tooltip("side:N"), tooltip("mean:Q", ",.2f"))
_RANGE_TIPS = (tooltip("low:Q", ",.2f"), tooltip("high:Q", ",.2f"), tooltip("runs:Q"))


def _error_bars(frame: pd.DataFrame, x: alt.X, title: str) -> alt.Chart:
    return (
        alt.Chart(frame)
        # Caps a fixed width, not the band's; one colour for stems and caps.
        .mark_errorbar(color=WHISKER, ticks=alt.MarkConfig(size=CAP_PX, color=WHISKER))
        .encode(x=x, y=alt.Y("low:Q", title=title, scale=FROM_ZERO), y2=alt.Y2("high"))
    )


def bar_chart(
    comparison: Comparison, key: str, error: str = "ci", title: str | None = None
) -> alt.TopLevelMixin:
    """Mean per side with its error bar and every run as a dot: the spread is part of the answer."""
    metric = METRIC_BY_KEY[key]
    frame = side_frame(comparison, [key], error)
    order = side_order(comparison)
    title_y = y_title(metric)
    band = 70
    x = alt.X(
        "side:N",
        sort=order,
        title=chart_text(comparison.param or "side"),
        axis=band_axis(order, band),
    )
    bars = (
        alt.Chart(frame)
        .mark_bar(opacity=0.8)
        .encode(
            x=x,
            y=alt.Y("mean:Q", title=title_y, scale=FROM_ZERO),
            color=side_color(order, legend=None),
            tooltip=[*_MEAN_TIPS, *_RANGE_TIPS],
        )
    )
    points = (
        alt.Chart(run_points(comparison, [key]))
        .mark_circle(size=30, color="black", opacity=0.6)
        .encode(
            x=x,
            y=alt.Y("value:Q", scale=FROM_ZERO),
            tooltip=[tooltip("run:N"), tooltip("value:Q", ",.2f")],
        )
    )
    return alt.layer(  # top-level properties here: .properties() validates each against the schema
        bars,
        _error_bars(frame, x, title_y),
        points,
        width=max(160, band * len(order)),
        height=260,
        title=alt.TitleParams(
            title or metric.label,
            subtitle=["bars: mean; dots: runs", *whisker_lines(error)],
        ),
    )


def throughput_chart(comparison: Comparison, error: str = "ci") -> alt.TopLevelMixin:
    return bar_chart(comparison, "output_throughput", error, "Output throughput (tok/s)")


def latency_chart(
    comparison: Comparison, error: str = "ci", latencies: Sequence[str] = LATENCIES
) -> alt.FacetChart:
    """Mean, p50 and p99 of each latency, side by side per value, one panel per latency."""
    keys = [f"{stat}_{lat}_ms" for lat in latencies for stat in STATS]
    frame = side_frame(comparison, [k for k in keys if k in METRIC_BY_KEY], error)
    frame["latency"] = frame["metric"].str.split("_").str[1].str.upper()
    frame["stat"] = frame["metric"].str.split("_").str[0].map(STATS)
    order = side_order(comparison)
    base = alt.Chart().encode(
        x=alt.X("stat:N", sort=list(STATS.values()), title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("side:N", sort=order),
        color=side_color(order, title=chart_text(comparison.param or "side"), legend=LEGEND_BELOW),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("mean:Q", title="ms", scale=FROM_ZERO),
        tooltip=[_MEAN_TIPS[0], tooltip("latency:N"), tooltip("stat:N"), *_MEAN_TIPS[1:]]
        + list(_RANGE_TIPS),
    )
    rules = base.mark_rule().encode(
        y=alt.Y("low:Q", scale=FROM_ZERO), y2=alt.Y2("high"), color=alt.ColorValue("black")
    )
    return (
        alt.layer(bars, rules, data=frame, width=LATENCY_PANEL_PX, height=200)
        .facet(
            facet=alt.Facet("latency:N", sort=[x.upper() for x in latencies], title=None),
            columns=2,
            title=alt.TitleParams(
                "Latency per value (ms)",
                subtitle=[
                    "TTFT, TPOT = (E2EL − TTFT)/(output tokens − 1), ITL, E2EL",
                    *whisker_lines(error),
                ],
            ),
        )
        .resolve_scale(y="independent")
    )


def knee_chart(
    comparison: Comparison,
    keys: Sequence[str] = ("output_throughput", "p99_ttft_ms"),
    error: str = "ci",
    marks: Mapping[str, float] | None = None,
    limits: Mapping[str, tuple[str, float]] | None = None,
    columns: int = 2,
) -> alt.ConcatChart:
    """For a numeric parameter: each metric's mean vs the value (line + points + error bars),
    where the curve flattens or turns is the knee; `marks` (label -> value: the chosen value,
    the knee) are drawn as labelled vertical rules on every panel, `limits` (metric key ->
    (label, y): an SLO) as a labelled horizontal rule on that metric's panel."""
    short = short_labels(comparison)
    values = {short[s.label]: s.value for s in comparison.sides}
    x_title, x_scale = param_axis(comparison.param)
    scaled_marks = {k: v * x_scale for k, v in (marks or {}).items()}
    charts = []
    for key in (k for k in keys if k in METRIC_BY_KEY):
        frame = side_frame(comparison, [key], error)
        if frame.empty:
            continue
        frame["x"] = frame["side"].map(lambda s: _scaled(as_float(values.get(s)), x_scale))
        frame = frame.dropna(subset=["x"])
        metric = METRIC_BY_KEY[key]
        x = alt.X("x:Q", title=x_title, scale=alt.Scale(zero=False))
        title_y = y_title(metric)
        line = (
            alt.Chart(frame)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("mean:Q", title=title_y, scale=FROM_ZERO),
                tooltip=[*_MEAN_TIPS, tooltip("runs:Q")],
            )
        )
        layers = [line, _error_bars(frame, x, title_y), *_mark_rules(scaled_marks, x)]
        if limits and key in limits:
            layers += _limit_rule(*limits[key])
        charts.append(
            alt.layer(
                *layers,
                width=300 if columns == 1 else KNEE_PANEL_PX,
                height=220,
                title=f"{metric.label} vs value",
            )
        )
    if not charts:
        charts.append(alt.Chart(pd.DataFrame({"x": []})).mark_point())
    title = alt.TitleParams(
        f"Where it bends: metric vs {chart_text(comparison.param or 'value')}",
        subtitle=["mean over runs", *whisker_lines(error)],
    )
    # `columns` panels a row: two of KNEE_PANEL_PX fit the Compare page in a 1024 px window
    return alt.concat(*charts, columns=columns, title=title)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _mark_rules(marks: Mapping[str, float], x: alt.X) -> list[alt.Chart]:
    """A dashed vertical rule and its label per mark (value -> 'chosen', 'knee', ...)."""
    if not marks:
        return []
    frame = pd.DataFrame({"mark": list(marks), "x": [float(v) for v in marks.values()]})
    base = alt.Chart(frame).encode(x=x)
    rule = base.mark_rule(strokeDash=[4, 3], color="#cf222e").encode(
        tooltip=[tooltip("mark:N"), tooltip("x:Q", ",.4g")]
    )
    text = base.mark_text(align="left", dx=3, dy=-4, baseline="top", color="#cf222e").encode(
        y=alt.value(0), text="mark:N"
    )
    return [rule, text]


def _limit_rule(label: str, y: float) -> list[alt.Chart]:
    """A dashed horizontal rule and its label: a limit the metric must stay under (an SLO)."""
    base = alt.Chart(pd.DataFrame({"limit": [label], "y": [float(y)]})).encode(y="y:Q")
    rule = base.mark_rule(strokeDash=[6, 3], color="#9a6700").encode(
        tooltip=[tooltip("limit:N"), tooltip("y:Q", ",.4g")]
    )
    text = base.mark_text(align="right", dy=-6, color="#9a6700").encode(
        x=alt.value(295), text="limit:N"
    )
    return [rule, text]


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
            for q, v in zip(qs, np.quantile(vals, qs), strict=True):
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
        alt.Chart(frame, width=190, height=180)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("value_ms:Q", title="ms"),
            y=alt.Y("quantile:Q", title="share of requests ≤ x", axis=alt.Axis(format="%")),
            color=side_color(order, title="side", legend=LEGEND_BELOW),
            tooltip=[
                tooltip("side:N"),
                tooltip("metric:N"),
                tooltip("value_ms:Q", ",.2f"),
                tooltip("quantile:Q", ".0%"),
            ],
        )
        .facet(
            facet=alt.Facet("metric:N", sort=metrics_order, title=None),
            columns=2,
            title=alt.TitleParams(
                "Latency CDF per request", subtitle="pooled over each side's runs (sampled rows)"
            ),
        )
        .resolve_scale(x="independent")
    )
