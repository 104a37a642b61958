"""Run tables people read: every number in its unit (tok/s with thousands separators, ms, GiB, %),
rounded to the unit's precision, KV usage as a bar, health as a badge, and each column's help naming
its formula. One registry (RUN_COLUMNS) serves the Runs, Live and History tables.

`run_frame(runs, keys)` builds the data (numbers converted to the unit the cell shows and rounded to
its precision, so the browser never gets more digits than it may show), `run_column_config(keys)`
says how Streamlit draws it; `render_run_table` does both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from tuning.engine.params import show_value
from ui.health import config_badge, health_badge
from ui.words import failure_words

# Decimals a cell of each unit shows; the page test checks every cell against this.
PRECISION: dict[str, int] = {
    "tok/s": 0,
    "req/s": 2,
    "ms": 1,
    "s": 1,
    "GiB": 2,
    "%": 1,
    "tokens": 0,
    "count": 0,
}
# What an empty cell of an engine fact means (the table's placeholder is "—").
NOT_REPORTED = (
    "— = not reported by the engine (a failed start, a backend without the counter, or an "
    "engine version that does not log it)."
)
# Badges: the good word, the unchecked word, then every problem found (amber).
GOOD, UNCHECKED = "#1a7f37", "#6e7781"
PROBLEM = "#bf8700"
# A badge's text in 14 px Source Sans (at most ~7.5 px a character) plus its pill and the cell's
# padding; a long problem list is capped (its details are under Run health).
BADGE_PX_PER_CHAR, BADGE_PAD_PX, BADGE_MAX_PX = 7.5, 40, 320


@dataclass(frozen=True)
class Col:
    """One column: the run's key, its header, the unit its cells show, and its help text."""

    key: str
    label: str
    unit: str = ""  # a PRECISION key; "" = text or an id
    help: str = ""
    scale: float = 1.0  # stored value x scale = shown value (bytes -> GiB, 0-1 -> %)
    engine_fact: bool = False  # empty = not reported by the engine


_GIB = 1 / 2**30
COLUMNS: tuple[Col, ...] = (
    Col("id", "run"),
    Col("experiment_id", "exp"),
    Col("param", "parameter"),
    Col("value", "value"),
    Col("repeat_index", "repeat", help="the repeat of this value, counted from 1"),
    Col("status", "status"),
    Col(
        "output_throughput",
        "output",
        "tok/s",
        "successful output tokens / (first dispatch → last completion)",
    ),
    Col("request_throughput", "requests", "req/s", "successful requests / duration"),
    Col("mean_ttft_ms", "mean TTFT", "ms", "time to first token: first content chunk − send"),
    Col("p99_ttft_ms", "p99 TTFT", "ms", "99th percentile of TTFT (linear interpolation)"),
    Col("mean_tpot_ms", "mean TPOT", "ms", "(E2EL − TTFT) / (output tokens − 1) per request"),
    Col("mean_itl_ms", "mean ITL", "ms", "gaps between content chunks, over all chunks"),
    Col("mean_e2el_ms", "mean E2EL", "ms", "end-to-end latency: last chunk − send"),
    Col("completed", "completed", "count", "requests that succeeded"),
    Col("failed", "failed", "count", "requests that failed, any kind"),
    Col(
        "kv_cache_tokens",
        "KV capacity",
        "tokens",
        "tokens the KV cache holds, from the engine's start log",
        engine_fact=True,
    ),
    Col(
        "peak_tree_rss_bytes",
        "peak RSS",
        "GiB",
        "peak resident memory of the server's process tree, sampled",
        _GIB,
    ),
    Col(
        "peak_gpu_tree_bytes",
        "peak GPU",
        "GiB",
        "peak GPU memory of the server's processes (NVML), sampled",
        _GIB,
        engine_fact=True,
    ),
    Col(
        "preemptions",
        "preemptions",
        "count",
        "vLLM's num_preemptions counter over the run",
        engine_fact=True,
    ),
    Col(
        "time_to_healthy_s",
        "time to healthy",
        "s",
        "server start → first /health 200",
    ),
    Col("failure_kind", "failure"),
    Col("author", "author"),
    Col("tags", "tags"),
    Col("notes", "notes"),
    Col("hidden", "hidden"),
    Col("hardware", "hardware"),
    Col("finished_at", "finished (UTC)"),
)
BY_KEY = {c.key: c for c in COLUMNS}
# Not in COLUMNS: drawn specially.
KV_USAGE = "peak_kv_cache_usage_perc"
HEALTH = "health"
CONFIG = "config"
# What every run table starts with (which run it is, the run column pinned) and the three numbers
# each one shows right after it: a 1024 px window shows them before anything scrolls.
RUN_IDENTITY: tuple[str, ...] = ("id", "param", "value")
KEY_NUMBERS: tuple[str, ...] = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
# Where the run sits: its experiment and its repeat (1-based, as the Compare page's chips say).
RUN_PLACE: tuple[str, ...] = ("experiment_id", "repeat_index")
RUNS_PAGE_KEYS: tuple[str, ...] = (
    *RUN_IDENTITY,
    *KEY_NUMBERS,
    "status",
    HEALTH,
    CONFIG,
    *RUN_PLACE,
    "request_throughput",
    "p99_ttft_ms",
    "mean_itl_ms",
    "mean_e2el_ms",
    KV_USAGE,
    "kv_cache_tokens",
    "peak_tree_rss_bytes",
    "peak_gpu_tree_bytes",
    "preemptions",
    "completed",
    "failed",
    "time_to_healthy_s",
    "failure_kind",
    "author",
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None


def cell_value(col: Col, value: Any) -> Any:
    """The value as its cell shows it: in the unit, rounded to the unit's precision."""
    if not col.unit:
        return value
    x = _number(value)
    if x is None:
        return None
    digits = PRECISION[col.unit]
    out = round(x * col.scale, digits)
    return int(out) if digits == 0 else out


def _badge(text: str) -> list[str]:
    """A badge cell (a one-item list for a MultiselectColumn)."""
    return ["not checked" if text == "—" else text]


def _badge_column(label: str, good: str, cells: Iterable[list[str]], help_text: str) -> Any:
    """A badge column as wide as its longest badge (a cut "suspec" reads as nothing)."""
    shown = {c[0] for c in cells}
    problems = sorted(shown - {good, "not checked"})
    longest = max((len(t) for t in shown | {label}), default=0)
    return st.column_config.MultiselectColumn(
        label,
        options=[good, "not checked", *problems],
        color=[GOOD, UNCHECKED, *[PROBLEM] * len(problems)],
        help=help_text,
        width=min(BADGE_MAX_PX, BADGE_PAD_PX + BADGE_PX_PER_CHAR * longest),
    )


Extra = Callable[[Mapping[str, Any]], dict[str, Any]]


def run_frame(
    runs: Iterable[Mapping[str, Any]], keys: Sequence[str], extra: Extra | None = None
) -> pd.DataFrame:
    """One row per run with the columns `keys` (COLUMNS keys, KV_USAGE, HEALTH, CONFIG), then
    the columns `extra(run)` adds (a page's own, drawn as they are)."""
    rows = []
    for r in runs:
        row: dict[str, Any] = {}
        for key in keys:
            if key == HEALTH:
                row[key] = _badge(health_badge(r))
            elif key == CONFIG:
                row[key] = _badge(config_badge(r))
            elif key == KV_USAGE:
                x = _number(r.get(key))
                row[key] = None if x is None else round(x * 100, PRECISION["%"])
            elif key == "value":
                row[key] = show_value(r.get("param"), r.get(key))
            elif key == "failure_kind":
                row[key] = failure_words(r.get(key)) or None
            elif key == "repeat_index":
                rep = _number(r.get(key))
                row[key] = None if rep is None else int(rep) + 1
            else:
                row[key] = cell_value(BY_KEY[key], r.get(key))
        rows.append({**row, **(extra(r) if extra else {})})
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(keys))


def _printf(unit: str) -> str:
    """'%,.1f ms': thousands separators, the unit's decimals, the unit in the cell."""
    spec = f"%,.{PRECISION[unit]}f"
    return spec if unit == "count" else f"{spec} {unit}"


def is_number_column(column: pd.Series) -> bool:
    types = pd.api.types
    return bool(types.is_numeric_dtype(column) and not types.is_bool_dtype(column))


def run_column_config(frame: pd.DataFrame) -> dict[str, Any]:
    """How each column of `frame` (a `run_frame`) is drawn."""
    cc = st.column_config
    out: dict[str, Any] = {}
    for key in frame.columns:
        if key == HEALTH:
            out[key] = _badge_column(
                "health",
                "ok",
                frame[key],
                "ok: the client kept the target concurrency and token counts agree; "
                "suspect: which check failed (details under Run health)",
            )
        elif key == CONFIG:
            out[key] = _badge_column(
                "config",
                "applied",
                frame[key],
                "whether the engine ran with the configuration the run asked for",
            )
        elif key == KV_USAGE:
            out[key] = cc.ProgressColumn(
                "peak KV usage",
                min_value=0,
                max_value=100,
                format=f"%.{PRECISION['%']}f %%",
                help="vLLM's kv_cache_usage_perc, peak over the run. " + NOT_REPORTED,
            )
        elif key == "id":
            out[key] = cc.Column("run", pinned=True)
        elif key in BY_KEY:
            col = BY_KEY[key]
            help_text = col.help + (f" {NOT_REPORTED}" if col.engine_fact else "")
            if col.unit:
                out[key] = cc.NumberColumn(
                    col.label, format=_printf(col.unit), help=help_text or None
                )
            else:
                out[key] = cc.Column(col.label, help=help_text or None)
        elif is_number_column(frame[key]):  # a page's own column: separators too
            whole = frame[key].dropna().map(lambda x: float(x).is_integer()).all()
            out[key] = cc.NumberColumn(format="%,.0f" if whole else "%,.2f")
    return out


def render_run_table(
    runs: Sequence[Mapping[str, Any]], keys: Sequence[str], key: str, extra: Extra | None = None
) -> None:
    """The table of `runs` with the columns `keys`, formatted by unit (and `extra`'s, as is)."""
    frame = run_frame(runs, keys, extra)
    st.dataframe(
        frame,
        hide_index=True,
        key=key,
        width="stretch",
        column_config=run_column_config(frame),
        placeholder="—",
    )
