"""Compare's side-by-side table kept readable when it is wide: with two or more candidates, the
metric, one candidate's value and its verdict are pinned (the candidate in view is picked above
the table) and the rest scrolls beside them; "differences only" keeps the metrics a verdict
found better or worse (as W&B's run comparison hides the rows that do not differ)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from tuning.compare.comparison import Comparison
from tuning.compare.present import TONE_CSS, side_heading

FOCUS_KEY = "cmp_focus"
DIFF_KEY = "cmp_diff_only"
DECIDED = frozenset({TONE_CSS["better"], TONE_CSS["worse"]})
DIFF_HELP = (
    "Only the metrics whose verdict is better or worse for a candidate: the differences the "
    "experiment's rule stands behind (equivalent and undecided rows are left out)."
)


def focus_order(columns: Sequence[str], heads: Sequence[str], focus: str) -> list[str]:
    """The table's columns with the candidate in view first after the metric: its value, its
    verdict and its change, then the baseline's value and what would decide it; then every
    other column in its own order. `heads`: the candidates' column headings."""
    first = ["metric", focus, f"verdict {focus}", f"Δ {focus}"]
    first += [c for c in columns if c.endswith(" (baseline)")] + [f"to decide {focus}"]
    first = [c for c in first if c in columns]
    return first + [c for c in columns if c not in first]


def pinned_columns(heads: Sequence[str], focus: str) -> list[str]:
    """What stays put while the table scrolls: the metric, and with two or more candidates the
    one in view's value and verdict."""
    return ["metric", focus, f"verdict {focus}"] if len(heads) > 1 else ["metric"]


def decided_rows(text: pd.DataFrame, css: pd.DataFrame) -> pd.Series:
    """Rows where some candidate's verdict is better or worse."""
    verdicts = [c for c in css.columns if str(c).startswith("verdict ")]
    if not verdicts:
        return pd.Series(False, index=text.index)
    return css[verdicts].isin(DECIDED).any(axis=1)


def table_view(
    comparison: Comparison, text: pd.DataFrame, css: pd.DataFrame, widths: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, Any]]:
    """The table as the user set it above it: (text, css, column order, column config)."""
    heads = [side_heading(comparison, s) for s in comparison.candidates]
    row = st.container(horizontal=True, key="cmp_table_view")
    focus = heads[0] if heads else ""
    if len(heads) > 1:
        focus = row.selectbox(
            "Candidate in view",
            list(heads),
            key=FOCUS_KEY,
            help="Its value and verdict stay pinned beside the metric while the table scrolls.",
        )
    only = row.toggle("Differences only", key=DIFF_KEY, help=DIFF_HELP)
    if only:
        keep = decided_rows(text, css)
        text, css = text[keep], css[keep]
        if text.empty:
            st.caption("No metric differs beyond doubt: every verdict is equivalent or undecided.")
    order = focus_order(list(text.columns), heads, focus) if len(heads) > 1 else list(text.columns)
    config = dict(widths)
    for column in pinned_columns(heads, focus):
        old = config.get(column)
        width = old.get("width") if isinstance(old, dict) else None
        config[column] = st.column_config.Column(pinned=True, width=width)
    return text, css, order, config
