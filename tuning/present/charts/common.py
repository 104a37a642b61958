"""What every chart shares: side labels and their order, tooltips, downsampling, and the frame of
side means with error bars.

Every chart gets small data: side means rather than runs, CDFs at fixed quantiles rather than
every request, and time series downsampled to at most `MAX_POINTS` points per chart, so a chart
of 20 runs stays a few hundred kilobytes in the browser and in an exported HTML file.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any, cast

import altair as alt
import numpy as np
import pandas as pd

from core.units import GIB
from tuning.compare.catalog import METRIC_BY_KEY, Metric
from tuning.compare.comparison import Comparison
from tuning.engine.params import get_param, show_value

MAX_POINTS = 2000
# Streamlit's categorical colours (its light theme's chartCategoricalColors), set on every side's
# colour scale: the page draws with Streamlit's theme, an export with Vega's defaults, and only
# an explicit range makes both the same. Sides take them in order, the baseline first, so a side
# keeps its colour on every chart of a comparison.
PALETTE = (
    "#0068c9",
    "#83c9ff",
    "#ff2b2b",
    "#ffabab",
    "#29b09d",
    "#7defa1",
    "#ff8700",
    "#ffd16a",
    "#6d3fc0",
    "#d5dae5",
)
CAP_PX = 12  # a whisker's cap, whatever the band's width
LABEL_PX = 6.5  # an axis label's character at Vega's 10 px default font, about
# What the whiskers are, said exactly: stats.mean_interval, the verdicts' rule on one side's mean.
CI_NOTE = (
    "95 % interval of each side's mean over its runs, the wider of a bootstrap and Student's t "
    "on the log scale (the rule the verdicts use; never below 0); none with one run"
)
MINMAX_NOTE = "min–max of the runs"
# The y scale of every metric of the catalogue: all are non-negative, so their axes start at 0
# (and the whiskers, on the log scale of the mean, never reach below it).
FROM_ZERO = alt.Scale(domainMin=0)
LABEL_CHARS = 80
SUBTITLE_CHARS = 72
# Where a chart with a side legend puts it: under the plot, so the chart stays within a narrow
# window's width (a legend on the right adds its longest label to the chart's width).
LEGEND_BELOW = alt.Legend(orient="bottom", direction="horizontal", columns=4)
# C0 and C1 controls, zero-width and bidi format characters, line and paragraph separators.
_NOT_SHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def whisker_note(error: str) -> str:
    """What a chart's whiskers are, for its subtitle: error='ci' or 'minmax'."""
    return CI_NOTE if error == "ci" else MINMAX_NOTE


def subtitle_lines(*texts: str) -> list[str]:
    """A subtitle as lines of at most SUBTITLE_CHARS: Vega does not wrap a title, and one long
    line widens the whole chart past a 1024 px window."""
    return [line for text in texts for line in textwrap.wrap(text, SUBTITLE_CHARS)]


def whisker_lines(error: str) -> list[str]:
    """'whiskers: ...' as subtitle lines."""
    return subtitle_lines(f"whiskers: {whisker_note(error)}")


def side_scale(order: Sequence[str]) -> alt.Scale:
    """The sides' colours: PALETTE in side order (cycled past ten sides)."""
    return alt.Scale(
        domain=list(order), range=[PALETTE[i % len(PALETTE)] for i in range(len(order))]
    )


def side_color(order: Sequence[str], field: str = "side:N", **kw: Any) -> alt.Color:
    """A colour channel by side with the fixed palette; `kw` as alt.Color takes (title, legend)."""
    return alt.Color(field, sort=list(order), scale=side_scale(order), **kw)


def band_axis(labels: Sequence[str], band_px: float) -> alt.Axis:
    """An axis of side labels that never collide: level when the longest fits its band, else
    turned 35° and cut at 160 px with an ellipsis."""
    longest = max((len(x) for x in labels), default=0) * LABEL_PX
    if longest <= band_px - 6:
        return alt.Axis(labelAngle=0, labelLimit=int(band_px))
    return alt.Axis(labelAngle=-35, labelAlign="right", labelLimit=160, labelOverlap=False)


def with_context(chart: alt.TopLevelMixin, lines: Sequence[str]) -> alt.TopLevelMixin:
    """The chart with `lines` (tuning.compare.context: model, hardware, vLLM, workload) under its
    title, at the top level so a layered, concatenated or faceted chart carries them once; a
    copy, the chart given is left as it is."""
    if not lines:
        return chart
    out = cast(Any, chart).copy(deep=False)  # SchemaBase.copy: its own _kwds, nothing shared
    title = getattr(out, "title", alt.Undefined)
    text: Any = ""
    subtitle: list[str] = []
    if isinstance(title, alt.TitleParams):
        text = title.text
        old = title.subtitle
        subtitle = [old] if isinstance(old, str) else [] if old is alt.Undefined else list(old)
        params = title.copy(deep=True)
    else:
        text = "" if title is alt.Undefined else title
        params = alt.TitleParams(text)
    params.subtitle = [*(x for x in subtitle if x), *(chart_text(x, 160) for x in lines)]
    params.text = text
    out.title = params
    return out


def tooltip(field: str, fmt: str | None = None) -> alt.Tooltip:
    """Channel objects, never shorthand strings: Altair turns each string into a schema lookup
    that costs ~10 ms, which a page of six charts would feel."""
    return alt.Tooltip(field, format=fmt) if fmt else alt.Tooltip(field)


def chart_text(value: Any, limit: int = LABEL_CHARS) -> str:
    """Text from data (a run value, a parameter name) as a chart shows it: one line, at most
    `limit` characters, with control, format and line-separator characters as spaces. Vega
    quotes sort lists into expressions, where a U+2028 is a syntax error, so one such value
    kept every chart of its comparison from drawing."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _NOT_SHOWN.sub(" ", text)


def axis_unit(metric: Metric) -> tuple[str, float]:
    """The unit a metric is drawn in and the factor to it: byte counts in GiB (an axis of
    '16,000,000,000' reads as nothing), everything else as stored."""
    return ("GiB", 1.0 / GIB) if metric.unit == "bytes" else (metric.unit, 1.0)


def y_title(metric: Metric) -> str:
    """'peak GPU memory (server tree) (GiB)': the label and the unit the axis is drawn in."""
    return f"{metric.label} ({axis_unit(metric)[0]})"


def param_axis(param: str | None) -> tuple[str, float]:
    """A parameter's axis title and the factor its values are drawn with: a bytes-typed one in
    GiB ('kv-cache-memory-bytes (GiB)'), anything else as it is."""
    name = chart_text(param or "value")
    try:
        bytes_typed = param is not None and get_param(param).type == "bytes"
    except ValueError:
        bytes_typed = False
    return (f"{name} (GiB)", 1.0 / GIB) if bytes_typed else (name, 1.0)


def short_labels(comparison: Comparison) -> dict[str, str]:
    """Side label -> what an axis shows: the value alone ('16', '2 (baseline)') when those are
    unique, else the full 'param = value' labels; each as `chart_text`, kept unique."""
    out = {}
    for side in comparison.sides:
        mine = side.value is not None and side.param == comparison.param
        short = show_value(side.param, side.value) if mine else None
        if short is not None and side is comparison.baseline:
            short = f"{short} (baseline)"
        out[side.label] = chart_text(short or side.label)
    if len(set(out.values())) != len(out):
        out = {s.label: chart_text(s.label) for s in comparison.sides}
    if len(set(out.values())) != len(out):  # different only past the limit or in hidden chars
        out = {
            s.label: f"{i + 1}: {text}"
            for i, (s, text) in enumerate(zip(comparison.sides, out.values(), strict=True))
        }
    return out


def side_order(comparison: Comparison) -> list[str]:
    return list(short_labels(comparison).values())


def as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def downsample(
    points: Sequence[tuple[float, float]], max_points: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """At most `max_points` (t, v): the max of equal-count buckets, so peaks stay visible."""
    if len(points) <= max_points:
        return list(points)
    arr = np.asarray(points, dtype=float)
    edges = np.linspace(0, arr.shape[0], max_points + 1).astype(int)
    out = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b > a:
            chunk = arr[a:b]
            out.append((float(chunk[-1, 0]), float(chunk[:, 1].max())))
    return out


def side_frame(comparison: Comparison, keys: Iterable[str], error: str = "ci") -> pd.DataFrame:
    """One row per (side, metric), in the unit the axis draws (`axis_unit`): mean and the error
    bar ends: the interval of the mean by the
    verdicts' rule (stats.mean_interval, see CI_NOTE), or the runs' min-max with error='minmax'; one
    run gives no bar."""
    rows = []
    short = short_labels(comparison)
    for side in comparison.sides:
        for key in keys:
            st = side.stats(key)
            if st["mean"] is None:
                continue
            lo, hi = st["min"], st["max"]
            if error == "ci":
                ci = side.mean_interval(key, comparison.confidence)
                lo, hi = ci if ci else (st["mean"], st["mean"])
            metric = METRIC_BY_KEY[key]
            unit, k = axis_unit(metric)
            rows.append(
                {
                    "side": short[side.label],
                    "metric": key,
                    "label": metric.label,
                    "unit": unit,
                    "mean": st["mean"] * k,
                    "low": None if lo is None else lo * k,
                    "high": None if hi is None else hi * k,
                    "runs": st["n"],
                }
            )
    return pd.DataFrame(
        rows, columns=["side", "metric", "label", "unit", "mean", "low", "high", "runs"]
    )


def run_points(comparison: Comparison, keys: Iterable[str]) -> pd.DataFrame:
    """Every measured run's value, one row per (side, metric, run): the dots over the bars, in
    the unit the axis draws."""
    rows = []
    short = short_labels(comparison)
    for side in comparison.sides:
        for key in keys:
            k = axis_unit(METRIC_BY_KEY[key])[1] if key in METRIC_BY_KEY else 1.0
            for rid, v in (side.per_run.get(key) or {}).items():
                if v is not None:
                    rows.append(
                        {"side": short[side.label], "metric": key, "run": rid, "value": v * k}
                    )
    return pd.DataFrame(rows, columns=["side", "metric", "run", "value"])
